/* A USB CDC-ACM serial port, the part that is the same on every USB device controller: the
 * descriptors and the answers to control requests on endpoint 0 (USB 2.0 ch. 9, CDC 1.2 / PSTN).
 * A controller driver (ports/stm32f4/usb_otg_fs.c) moves the packets and calls these.
 *
 * The host sees one serial port (Linux: /dev/ttyACM*, cdc_acm; macOS, Windows 10+: their built-in
 * CDC drivers); its serial number is the MCU's unique id in hex, which `hil` uses to find the
 * board again after a reconnect. Endpoints: 1 OUT and 1 IN bulk (64 bytes, the data), 2 IN
 * interrupt (notifications, never sent: there is no modem state to report). */
#ifndef HIL_CDC_ACM_H
#define HIL_CDC_ACM_H

#include <stddef.h>
#include <stdint.h>

#define CDC_EP0_SIZE 64u
#define CDC_DATA_OUT_EP 1u
#define CDC_DATA_IN_EP 1u
#define CDC_NOTIFY_EP 2u
#define CDC_DATA_SIZE 64u
#define CDC_NOTIFY_SIZE 8u

/* pid.codes' test VID/PID: fine on a bench; a product ships with a PID of its own */
#define CDC_VID 0x1209u
#define CDC_PID 0x0001u

enum cdc_action {
  CDC_SEND,        /* send `data` (`len` bytes, already cut to wLength) as the IN data stage */
  CDC_STATUS,      /* no data stage: send the zero-length IN status packet */
  CDC_RECEIVE,     /* an OUT data stage of `len` bytes follows: pass it to cdc_control_out() */
  CDC_STALL,       /* not supported: stall endpoint 0 */
};

enum cdc_event {   /* what a request asks of the controller, besides the answer */
  CDC_EV_NONE,
  CDC_EV_SET_ADDRESS,      /* `value`: the new address (the STM32 core takes it before the status stage) */
  CDC_EV_CONFIGURED,       /* open the data endpoints */
  CDC_EV_DECONFIGURED,     /* close them */
};

struct cdc_reply {
  enum cdc_action action;
  enum cdc_event event;
  const uint8_t *data;
  uint16_t len;
  uint16_t value;
};

struct cdc_state {
  uint8_t configuration;      /* 0 until SET_CONFIGURATION(1) */
  uint8_t line_coding[7];     /* what the host set: baud (LE u32), stop bits, parity, data bits */
  uint16_t control_lines;     /* SET_CONTROL_LINE_STATE: bit 0 DTR, bit 1 RTS */
  uint8_t pending_request;    /* the class request whose OUT data stage is awaited, else 0 */
  uint8_t serial_desc[2 + 2 * 24];   /* string descriptor 3: the unique id as 24 hex digits */
  uint8_t scratch[8];         /* GET_STATUS / GET_CONFIGURATION answers */
};

/* Fill in the serial number from the MCU's 96-bit unique id. */
void cdc_init(struct cdc_state *s, const uint8_t uid[12]);
/* Answer one SETUP packet (8 bytes, as received). */
void cdc_control(struct cdc_state *s, const uint8_t setup[8], struct cdc_reply *r);
/* The OUT data stage of the last CDC_RECEIVE; returns CDC_STATUS (or CDC_STALL if it is malformed). */
enum cdc_action cdc_control_out(struct cdc_state *s, const uint8_t *data, size_t len);
/* The descriptors, for tests and for controllers that want them. */
extern const uint8_t cdc_device_descriptor[18];
extern const uint8_t cdc_config_descriptor[67];

#endif
