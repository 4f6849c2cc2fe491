/* hil reference board firmware: the portable core of SPEC.md (protocol 1.0).
 *
 * C99, no malloc, no floating point: positions are µrad (int32), time is µs (uint64). All memory
 * is the one hil_board struct the port allocates (statically); its size is HIL_BOARD_BYTES-ish and
 * stated by `sizeof(struct hil_board)` (see README.md for the figure per build).
 *
 * The port feeds received UART bytes to hil_board_rx() and calls hil_board_tick() every servo
 * period (1 ms or faster); everything the board sends goes out through hal_uart_write(). The
 * hardware is reached only through hal.h.
 */
#ifndef HIL_FW_H
#define HIL_FW_H

#include <stdint.h>
#include <stddef.h>

#include "hil_generated.h"   /* message ids, states, faults, flags, limits: from the Python side */

#define HIL_FW_MAJOR 1
#define HIL_FW_MINOR 0
#define HIL_FW_PATCH 0
#define HIL_RX_BUF 258             /* one COBS chunk: body + code byte + slack */
#define HIL_TX_BUF 262             /* one wire frame: 0x00 + COBS(body) + 0x00 */
#define HIL_TXN_CACHE 8            /* SPEC §5: the last 8 transactions' replies */
#define HIL_TXN_REPLY 16           /* bytes of a stored reply payload (ACK 4, PARAM_VALUE 9) */

/* what the board counts of bad input (reported in LOG on request and in tests) */
struct hil_rx_stats {
  uint32_t frames, bytes, empty, crc, cobs, too_short, too_long, version, reserved_flags;
  uint32_t unknown_id, bad_payload, cmd_rejected;
};

/* SPEC §2 receiver rules on a byte stream: calls `on_frame` for every valid body */
typedef void (*hil_frame_fn)(void *ctx, const uint8_t *body, size_t len);
struct hil_stream { uint8_t buf[HIL_RX_BUF]; uint16_t len; uint8_t overlong; struct hil_rx_stats stats; };

struct hil_joint_cfg {
  int32_t pos_min_urad, pos_max_urad;  /* board-side limits, enforced even with the link down */
  int32_t vel_max_mrad_s;
  int32_t max_step_urad;                /* largest accepted change of target per command */
};

struct hil_txn { uint16_t seq; uint8_t used, msg_id, len; uint8_t reply[HIL_TXN_REPLY]; };

struct hil_board {
  /* configuration (set before hil_board_init) */
  uint8_t kind, n_joints;
  uint32_t capabilities;
  struct hil_joint_cfg joint[HIL_MAX_JOINTS];
  uint32_t cmd_timeout_ms, idle_state_hz, link_timeout_ms, watchdog_action, relax_after_ms;
  uint16_t supply_mv;
  /* state */
  uint8_t state, raw_stream;
  uint32_t faults, boot_id;
  int32_t target[HIL_MAX_JOINTS];       /* µrad, command frame */
  uint8_t jflags[HIL_MAX_JOINTS];
  uint16_t tx_seq, echo_seq;
  uint64_t t_last_cmd, t_last_rx, t_last_idle, t_last_heartbeat, now;
  struct hil_txn txn[HIL_TXN_CACHE];
  uint8_t txn_next;
  struct hil_stream rx;                 /* the frame decoder: one partial chunk, frame-level counters */
  struct hil_rx_stats stats;            /* message-level counters: unknown_id, bad_payload, cmd_rejected */
  uint32_t applied, watchdog_trips;
};

/* Set kind, n_joints, limits and defaults; the board comes up DISABLED, targets = measured. */
void hil_board_init(struct hil_board *b, uint8_t kind, uint8_t n_joints, uint64_t now_us);
/* A power-on or reset: DISABLED, faults cleared, a fresh boot id, the clock from zero. */
void hil_board_boot(struct hil_board *b, uint64_t now_us);
/* Bytes from the UART, any chunking; frames are handled (and answered) as they complete. */
void hil_board_rx(struct hil_board *b, const uint8_t *data, size_t len, uint64_t now_us);
/* The periodic part: command watchdog, idle STATE, HEARTBEAT. */
void hil_board_tick(struct hil_board *b, uint64_t now_us);
/* What the hardware itself detects (a limit switch, an amplifier fault, a servo bus error):
 * the faults latch, an enabled board goes to FAULT and holds where it is. */
void hil_board_fault(struct hil_board *b, uint32_t faults);
/* Parameters saved by PARAM_SAVE (through hal_storage_*), or PARAMS_DEFAULTED when there are none
 * for this board kind; the ports call it after hil_board_init. 0 when loaded. */
int hil_board_load_params(struct hil_board *b);
/* The e-stop input: ESTOP at once, latched until CLEAR_FAULT. */
void hil_board_estop(struct hil_board *b);

/* framing, for the host tools and the differential test */
uint32_t hil_crc32(const uint8_t *data, size_t len);
size_t hil_cobs_encode(const uint8_t *in, size_t len, uint8_t *out);
/* returns the decoded length, or -1 if `in` is not valid COBS */
int hil_cobs_decode(const uint8_t *in, size_t len, uint8_t *out, size_t out_cap);
/* checks a decoded body (length, CRC, version, flags); 0 = ok, else the stats counter to bump */
enum { HIL_BODY_OK = 0, HIL_BODY_SHORT, HIL_BODY_CRC, HIL_BODY_VERSION, HIL_BODY_FLAGS };
int hil_check_body(const uint8_t *body, size_t len);
/* 1: the payload decodes as message `msg_id`; 0: too short for it; -1: no such message */
int hil_payload_ok(uint8_t msg_id, const uint8_t *p, size_t len);
void hil_stream_feed(struct hil_stream *s, const uint8_t *data, size_t len, hil_frame_fn on_frame, void *ctx);

#endif
