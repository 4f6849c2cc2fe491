/* Descriptors and endpoint-0 requests of the CDC-ACM serial port; see cdc_acm.h. */
#include "cdc_acm.h"

#include <string.h>

#define LE16(v) (uint8_t)((v) & 0xFFu), (uint8_t)((v) >> 8)

const uint8_t cdc_device_descriptor[18] = {
  18, 1, LE16(0x0200),        /* bLength, DEVICE, USB 2.0 */
  0x02, 0x00, 0x00,           /* class CDC at the device level (no IAD needed for one function) */
  CDC_EP0_SIZE, LE16(CDC_VID), LE16(CDC_PID), LE16(0x0100),
  1, 2, 3,                    /* strings: manufacturer, product, serial number */
  1,                          /* one configuration */
};

const uint8_t cdc_config_descriptor[67] = {
  9, 2, LE16(67), 2, 1, 0, 0x80, 50,           /* CONFIGURATION: 2 interfaces, bus powered, 100 mA */
  /* interface 0: communications class, ACM */
  9, 4, 0, 0, 1, 0x02, 0x02, 0x00, 0,          /* protocol 0: no AT commands */
  5, 0x24, 0x00, LE16(0x0120),                 /* header functional descriptor, CDC 1.20 */
  5, 0x24, 0x01, 0x00, 1,                      /* call management: none, data interface 1 */
  4, 0x24, 0x02, 0x02,                         /* ACM: line coding and control line state */
  5, 0x24, 0x06, 0, 1,                         /* union: master 0, slave 1 */
  7, 5, 0x80 | CDC_NOTIFY_EP, 0x03, LE16(CDC_NOTIFY_SIZE), 255,
  /* interface 1: data class, two bulk endpoints */
  9, 4, 1, 0, 2, 0x0A, 0x00, 0x00, 0,
  7, 5, CDC_DATA_OUT_EP, 0x02, LE16(CDC_DATA_SIZE), 0,
  7, 5, 0x80 | CDC_DATA_IN_EP, 0x02, LE16(CDC_DATA_SIZE), 0,
};

static const uint8_t lang_desc[4] = {4, 3, LE16(0x0409)};
static const uint8_t manufacturer_desc[8] = {8, 3, 'h', 0, 'i', 0, 'l', 0};
static const uint8_t product_desc[40] = {
  40, 3, 'h', 0, 'i', 0, 'l', 0, ' ', 0, 'r', 0, 'e', 0, 'f', 0, 'e', 0, 'r', 0, 'e', 0,
  'n', 0, 'c', 0, 'e', 0, ' ', 0, 'b', 0, 'o', 0, 'a', 0, 'r', 0, 'd', 0,
};

void cdc_init(struct cdc_state *s, const uint8_t uid[12]) {
  static const char hex[] = "0123456789abcdef";
  memset(s, 0, sizeof *s);
  /* 1 Mbaud 8N1 until the host says otherwise (nothing here depends on it) */
  static const uint8_t coding[7] = {0x40, 0x42, 0x0F, 0x00, 0, 0, 8};
  memcpy(s->line_coding, coding, sizeof coding);
  s->serial_desc[0] = (uint8_t)sizeof s->serial_desc;
  s->serial_desc[1] = 3;
  for (int i = 0; i < 12; i++) {
    s->serial_desc[2 + 4 * i] = (uint8_t)hex[uid[i] >> 4];
    s->serial_desc[2 + 4 * i + 2] = (uint8_t)hex[uid[i] & 15u];
  }
}

static void send(struct cdc_reply *r, const uint8_t *data, uint16_t len, uint16_t w_length) {
  r->action = CDC_SEND;
  r->data = data;
  r->len = len < w_length ? len : w_length;
}

static void get_descriptor(struct cdc_state *s, uint16_t value, uint16_t w_length, struct cdc_reply *r) {
  uint8_t type = (uint8_t)(value >> 8), index = (uint8_t)value;
  if (type == 1) {
    send(r, cdc_device_descriptor, sizeof cdc_device_descriptor, w_length);
  } else if (type == 2 && index == 0) {
    send(r, cdc_config_descriptor, sizeof cdc_config_descriptor, w_length);
  } else if (type == 3 && index == 0) {
    send(r, lang_desc, sizeof lang_desc, w_length);
  } else if (type == 3 && index == 1) {
    send(r, manufacturer_desc, sizeof manufacturer_desc, w_length);
  } else if (type == 3 && index == 2) {
    send(r, product_desc, sizeof product_desc, w_length);
  } else if (type == 3 && index == 3) {
    send(r, s->serial_desc, sizeof s->serial_desc, w_length);
  } else {
    r->action = CDC_STALL;   /* DEVICE_QUALIFIER included: a full-speed-only device stalls it */
  }
}

static void standard_request(struct cdc_state *s, uint8_t type, uint8_t request, uint16_t value,
                             uint16_t w_length, struct cdc_reply *r) {
  int device_in = type == 0x80, to_device = type == 0x00;
  switch (request) {
    case 0x00:  /* GET_STATUS: not self-powered, no remote wakeup, no endpoint halted */
      if (!(type & 0x80)) break;
      s->scratch[0] = s->scratch[1] = 0;
      send(r, s->scratch, 2, w_length);
      return;
    case 0x01:  /* CLEAR_FEATURE */
    case 0x03:  /* SET_FEATURE: endpoint halt and remote wakeup are accepted and ignored */
      if (type & 0x80) break;
      r->action = CDC_STATUS;
      return;
    case 0x05:  /* SET_ADDRESS */
      if (!to_device || value > 127) break;
      r->action = CDC_STATUS;
      r->event = CDC_EV_SET_ADDRESS;
      r->value = value;
      return;
    case 0x06:  /* GET_DESCRIPTOR */
      if (!device_in) break;
      get_descriptor(s, value, w_length, r);
      return;
    case 0x08:  /* GET_CONFIGURATION */
      if (!device_in) break;
      s->scratch[0] = s->configuration;
      send(r, s->scratch, 1, w_length);
      return;
    case 0x09:  /* SET_CONFIGURATION */
      if (!to_device || value > 1) break;
      s->configuration = (uint8_t)value;
      r->action = CDC_STATUS;
      r->event = value ? CDC_EV_CONFIGURED : CDC_EV_DECONFIGURED;
      return;
    case 0x0A:  /* GET_INTERFACE: one alternate setting each */
      if (type != 0x81) break;
      s->scratch[0] = 0;
      send(r, s->scratch, 1, w_length);
      return;
    case 0x0B:  /* SET_INTERFACE */
      if (type != 0x01 || value != 0) break;
      r->action = CDC_STATUS;
      return;
    default:
      break;
  }
  r->action = CDC_STALL;
}

static void class_request(struct cdc_state *s, uint8_t type, uint8_t request, uint16_t value,
                          uint16_t w_length, struct cdc_reply *r) {
  if (type == 0x21 && request == 0x20 && w_length == 7) {          /* SET_LINE_CODING */
    s->pending_request = request;
    r->action = CDC_RECEIVE;
    r->len = 7;
  } else if (type == 0xA1 && request == 0x21) {                    /* GET_LINE_CODING */
    send(r, s->line_coding, sizeof s->line_coding, w_length);
  } else if (type == 0x21 && (request == 0x22 || request == 0x23)) {   /* SET_CONTROL_LINE_STATE, SEND_BREAK */
    if (request == 0x22) s->control_lines = value;
    r->action = CDC_STATUS;
  } else {
    r->action = CDC_STALL;
  }
}

void cdc_control(struct cdc_state *s, const uint8_t setup[8], struct cdc_reply *r) {
  uint8_t type = setup[0], request = setup[1];
  uint16_t value = (uint16_t)(setup[2] | setup[3] << 8);
  uint16_t w_length = (uint16_t)(setup[6] | setup[7] << 8);
  memset(r, 0, sizeof *r);
  s->pending_request = 0;   /* a new SETUP abandons an unfinished one (USB 2.0 §8.5.3) */
  if ((type & 0x60) == 0x00) standard_request(s, type, request, value, w_length, r);
  else if ((type & 0x60) == 0x20) class_request(s, type, request, value, w_length, r);
  else r->action = CDC_STALL;
  if (r->action == CDC_SEND && r->len == 0) r->action = CDC_STATUS;   /* wLength 0: no data stage */
}

enum cdc_action cdc_control_out(struct cdc_state *s, const uint8_t *data, size_t len) {
  uint8_t request = s->pending_request;
  s->pending_request = 0;
  if (request != 0x20 || len != 7) return CDC_STALL;
  memcpy(s->line_coding, data, 7);
  return CDC_STATUS;
}
