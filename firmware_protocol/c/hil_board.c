/* SPEC.md §4–§7 on the board: messages, the state machine, the command watchdog, board-side
 * limits and step clamp, parameters, time sync, heartbeat. Integers only; all state in *b. */
#define HIL_WANT_RULES
#include "hil_fw.h"
#include "hal.h"

#include <string.h>

/* ------------------------------------------------------------------ byte helpers (no packed structs) */
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static uint8_t *wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); return p + 2; }
static uint8_t *wr32(uint8_t *p, uint32_t v) { p = wr16(p, (uint16_t)v); return wr16(p, (uint16_t)(v >> 16)); }
static uint8_t *wr64(uint8_t *p, uint64_t v) { p = wr32(p, (uint32_t)v); return wr32(p, (uint32_t)(v >> 32)); }

/* ------------------------------------------------------------------ sending */
static void send_frame(uint8_t msg_id, uint16_t seq, const uint8_t *payload, size_t len) {
  uint8_t body[HIL_MAX_BODY];
  uint8_t wire[HIL_TX_BUF];
  if (len + HIL_MIN_BODY > HIL_MAX_BODY) return;
  body[0] = (uint8_t)(HIL_PROTOCOL_MAJOR << 4);
  body[1] = msg_id;
  wr16(body + 2, seq);
  memcpy(body + 4, payload, len);
  wr32(body + 4 + len, hil_crc32(body, 4 + len));
  wire[0] = 0;
  size_t n = hil_cobs_encode(body, len + HIL_MIN_BODY, wire + 1);
  wire[n + 1] = 0;
  hal_uart_write(wire, n + 2);
}

static uint16_t next_seq(struct hil_board *b) { return ++b->tx_seq; }

static void send(struct hil_board *b, uint8_t msg_id, const uint8_t *payload, size_t len) {
  send_frame(msg_id, next_seq(b), payload, len);
}

static uint64_t t_us(const struct hil_board *b) { return b->now; }

/* a fact of the board's kind: a bit of one of the generated HIL_KINDS_* masks */
static uint8_t kind_has(const struct hil_board *b, uint32_t kinds) { return b->kind < 32 && (kinds >> b->kind & 1u); }

static uint8_t torque(const struct hil_board *b) {
  if (b->state == HIL_ENABLED) return 1;
  return b->state == HIL_FAULT && (b->faults & HIL_F_WATCHDOG) && b->watchdog_action == HIL_WD_HOLD &&
         kind_has(b, HIL_KINDS_WATCHDOG_HOLDS);
}

static void send_state(struct hil_board *b) {
  uint8_t p[HIL_MAX_PAYLOAD];
  int32_t pos[HIL_MAX_JOINTS];
  int16_t vel[HIL_MAX_JOINTS], cur[HIL_MAX_JOINTS];
  int8_t temp[HIL_MAX_JOINTS];
  uint8_t flags[HIL_MAX_JOINTS];
  uint8_t n = b->n_joints;
  hal_read_joints(pos, vel, cur, temp, flags, n);
  uint8_t *q = wr64(p, t_us(b));
  q = wr16(q, b->echo_seq);
  *q++ = b->state;
  *q++ = n;
  q = wr32(q, b->faults);
  q = wr16(q, hal_supply_mv());
  for (uint8_t j = 0; j < n; j++) {
    q = wr32(q, (uint32_t)pos[j]);
    q = wr16(q, (uint16_t)vel[j]);
    q = wr16(q, (uint16_t)cur[j]);
    *q++ = (uint8_t)temp[j];
    *q++ = (uint8_t)(flags[j] | b->jflags[j] | (torque(b) ? HIL_J_TORQUE_ON : 0));
  }
  int16_t quat[4], gyro[3], acc[3];
  if ((size_t)(q - p) + HIL_IMU_BYTES <= HIL_MAX_PAYLOAD && hal_read_imu(quat, gyro, acc)) {
    *q++ = 1;   /* the IMU block (SPEC §4.3): valid */
    for (int i = 0; i < 4; i++) q = wr16(q, (uint16_t)quat[i]);
    for (int i = 0; i < 3; i++) q = wr16(q, (uint16_t)gyro[i]);
    for (int i = 0; i < 3; i++) q = wr16(q, (uint16_t)acc[i]);
  }
  send(b, HIL_M_STATE, p, (size_t)(q - p));
}

static void send_heartbeat(struct hil_board *b) {
  uint8_t p[10];
  p[0] = b->state;
  p[1] = 0;
  wr32(p + 2, b->boot_id);
  wr32(p + 6, b->faults);
  send(b, HIL_M_HEARTBEAT, p, sizeof p);
}

/* a reply to a transaction: sent, and kept for a retransmission of the same seq (SPEC §5) */
static void reply(struct hil_board *b, uint16_t rx_seq, int txn, uint8_t msg_id, const uint8_t *p, uint8_t len) {
  uint16_t seq = next_seq(b);
  send_frame(msg_id, seq, p, len);
  if (!txn || len > HIL_TXN_REPLY) return;
  struct hil_txn *t = &b->txn[b->txn_next];
  b->txn_next = (uint8_t)((b->txn_next + 1) % HIL_TXN_CACHE);
  t->seq = rx_seq;
  t->used = 1;
  t->msg_id = msg_id;
  t->len = len;
  memcpy(t->reply, p, len);
  (void)seq;
}

static void ack(struct hil_board *b, uint8_t msg_id, uint16_t seq, int txn, uint8_t result) {
  uint8_t p[4] = {msg_id, (uint8_t)seq, (uint8_t)(seq >> 8), result};
  reply(b, seq, txn, HIL_M_ACK, p, sizeof p);
}

/* ------------------------------------------------------------------ the state machine */
static void drive(struct hil_board *b) { hal_write_joints(b->target, b->n_joints, torque(b)); }

/* The board table (board_behaviour.py, generated into hil_generated.h): the ACK result of
 * `req` in this state, and — when it is OK — the new state, faults and effects carried out.
 * `bits`: the faults to clear (CLEAR_FAULT) or that the hardware reports (HW_FAULT). */
static uint8_t react(struct hil_board *b, uint8_t req, uint32_t bits) {
  const struct hil_rule *r = &HIL_RULES[req][b->state < HIL_N_STATES ? b->state : HIL_BOOT];
  if (r->refused_by & b->faults) return HIL_ACK_BAD_STATE;
  if (r->result != HIL_ACK_OK) return r->result;
  uint32_t after = b->faults | r->latch;
  if (req == HIL_REQ_CLEAR_FAULT) after &= ~bits;
  if (req == HIL_REQ_HW_FAULT) after |= bits;
  uint8_t next = r->next;
  if (next == HIL_NEXT_UNCHANGED) next = b->state;
  if (next == HIL_NEXT_DISABLED_WHEN_CLEAR) next = (after & HIL_LATCHED_FAULTS) ? b->state : HIL_DISABLED;
  uint8_t fx = r->effects;
  if (req == HIL_REQ_CLEAR_FAULT && next == b->state) fx = 0;   /* still latched: nothing moves */
  uint8_t changed = next != b->state;
  b->faults = after;
  b->state = next;
  /* the actuators' own position in the command frame: torque on never makes a joint jump */
  if (fx & (HIL_FX_SEED_TARGETS | HIL_FX_HOLD_HERE)) hal_command_frame(b->target, b->n_joints);
  if (fx & HIL_FX_FEED_WATCHDOG) b->t_last_cmd = b->now;
  if (changed || (fx & (HIL_FX_SEED_TARGETS | HIL_FX_HOLD_HERE | HIL_FX_TORQUE_OFF))) drive(b);
  return r->result;
}

static void estop(struct hil_board *b) { react(b, HIL_REQ_ESTOP, 0); }

static void apply(struct hil_board *b, const uint8_t *pos, size_t stride, uint32_t mask) {
  for (uint8_t j = 0; j < b->n_joints; j++) {
    b->jflags[j] &= (uint8_t)~(HIL_J_LIMIT | HIL_J_STEP);
    if (!((mask >> j) & 1u)) continue;
    int64_t v = (int32_t)rd32(pos + j * stride);
    const struct hil_joint_cfg *c = &b->joint[j];
    /* a target outside the range (enabled where the joint stood, outside) widens it: inward only */
    int64_t lo = c->pos_min_urad < b->target[j] ? c->pos_min_urad : b->target[j];
    int64_t hi = c->pos_max_urad > b->target[j] ? c->pos_max_urad : b->target[j];
    if (v < lo || v > hi) {
      v = v < lo ? lo : hi;
      b->jflags[j] |= HIL_J_LIMIT;
    }
    int64_t step = v - b->target[j];
    if (step > c->max_step_urad || step < -(int64_t)c->max_step_urad) {
      v = b->target[j] + (step > 0 ? c->max_step_urad : -c->max_step_urad);
      b->jflags[j] |= HIL_J_STEP;
    }
    b->target[j] = (int32_t)v;
  }
  drive(b);
}

static void on_command(struct hil_board *b, const uint8_t *p, uint16_t seq, size_t stride) {
  uint8_t n = p[0], flags = p[1];
  uint32_t mask = rd32(p + 2);
  if (n != b->n_joints) {           /* the wrong robot's command: dropped, counted, never applied */
    b->stats.cmd_rejected++;
    b->faults |= HIL_F_CMD_REJECTED;
    return;
  }
  uint8_t applies = HIL_RULES[HIL_REQ_COMMAND][b->state < HIL_N_STATES ? b->state : HIL_BOOT].effects & HIL_FX_APPLY;
  react(b, HIL_REQ_COMMAND, 0);
  if (applies && !(flags & HIL_CMD_HOLD)) {
    apply(b, p + 6, stride, mask);
    b->echo_seq = seq;
    b->applied++;
  }
  send_state(b);
}

/* ------------------------------------------------------------------ parameters */
static uint8_t param_value(struct hil_board *b, uint16_t pid, uint8_t joint, uint8_t result, uint8_t *out) {
  uint32_t v = 0;
  uint8_t type = HIL_T_U32;
  int board = 1;
  switch (pid) {
    case HIL_P_CMD_TIMEOUT_MS: v = b->cmd_timeout_ms; break;
    case HIL_P_IDLE_STATE_HZ: v = b->idle_state_hz; break;
    case HIL_P_RAW_STREAM: v = b->raw_stream; break;
    case HIL_P_WATCHDOG_ACTION: v = b->watchdog_action; break;
    case HIL_P_LINK_TIMEOUT_MS: v = b->link_timeout_ms; break;
    case HIL_P_RELAX_AFTER_MS: v = b->relax_after_ms; break;
    case HIL_P_RX_DROPPED: {
      const struct hil_rx_stats *r = &b->rx.stats, *m = &b->stats;
      v = r->crc + r->cobs + r->too_short + r->too_long + r->version + r->reserved_flags + m->unknown_id +
          m->bad_payload + m->cmd_rejected;
      break;
    }
    default: board = 0;
  }
  if (!board) {
    type = HIL_T_I32;
    if (joint >= b->n_joints) {
      result = HIL_ACK_OUT_OF_RANGE;
    } else {
      const struct hil_joint_cfg *c = &b->joint[joint];
      switch (pid) {
        case HIL_P_TARGET: v = (uint32_t)b->target[joint]; break;
        case HIL_P_POS_MIN: v = (uint32_t)c->pos_min_urad; break;
        case HIL_P_POS_MAX: v = (uint32_t)c->pos_max_urad; break;
        case HIL_P_VEL_MAX: v = (uint32_t)c->vel_max_mrad_s; break;
        case HIL_P_MAX_STEP: v = (uint32_t)c->max_step_urad; break;
        case HIL_P_ZERO_OFFSET: v = 0; break;
        case HIL_P_DIRECTION: v = 1; break;
        default: result = HIL_ACK_UNKNOWN_PARAM;
      }
    }
  }
  uint8_t *q = wr16(out, pid);
  *q++ = joint;
  *q++ = type;
  q = wr32(q, v);
  *q++ = result;
  return (uint8_t)(q - out);
}

static uint8_t param_set(struct hil_board *b, const uint8_t *p, uint8_t *out) {
  uint16_t pid = rd16(p);
  uint8_t joint = p[2];
  int32_t value = (int32_t)rd32(p + 4);
  switch (pid) {
    case HIL_P_CMD_TIMEOUT_MS:
      if (value < (int32_t)HIL_CMD_TIMEOUT_MS_MIN || value > (int32_t)HIL_CMD_TIMEOUT_MS_MAX)
        return param_value(b, pid, joint, HIL_ACK_OUT_OF_RANGE, out);
      b->cmd_timeout_ms = (uint32_t)value;
      break;
    case HIL_P_RAW_STREAM: b->raw_stream = value != 0; break;
    case HIL_P_POS_MIN: case HIL_P_POS_MAX: case HIL_P_MAX_STEP: case HIL_P_VEL_MAX:
      if (react(b, HIL_REQ_SET_LIMITS, 0) != HIL_ACK_OK) return param_value(b, pid, joint, HIL_ACK_BAD_STATE, out);
      if (joint >= b->n_joints) return param_value(b, pid, joint, HIL_ACK_OUT_OF_RANGE, out);
      if (pid == HIL_P_POS_MIN) b->joint[joint].pos_min_urad = value;
      else if (pid == HIL_P_POS_MAX) b->joint[joint].pos_max_urad = value;
      else if (pid == HIL_P_MAX_STEP) b->joint[joint].max_step_urad = value < 0 ? -value : value;
      else b->joint[joint].vel_max_mrad_s = value;
      break;
    default: return param_value(b, pid, joint, HIL_ACK_READ_ONLY, out);
  }
  return param_value(b, pid, joint, HIL_ACK_OK, out);
}

/* ------------------------------------------------------------------ parameter storage */
#define PARAMS_MAGIC 0x48494C31u   /* "HIL1"; the HAL's record adds its own length and CRC */
struct params_record {
  uint32_t magic;
  uint8_t kind, n_joints, raw_stream, reserved;
  uint32_t cmd_timeout_ms, idle_state_hz, link_timeout_ms, watchdog_action, relax_after_ms;
  struct hil_joint_cfg joint[HIL_MAX_JOINTS];
};

static int save_params(const struct hil_board *b) {
  struct params_record r;
  memset(&r, 0, sizeof r);
  r.magic = PARAMS_MAGIC;
  r.kind = b->kind;
  r.n_joints = b->n_joints;
  r.cmd_timeout_ms = b->cmd_timeout_ms;
  r.idle_state_hz = b->idle_state_hz;
  r.link_timeout_ms = b->link_timeout_ms;
  r.watchdog_action = b->watchdog_action;
  r.relax_after_ms = b->relax_after_ms;
  memcpy(r.joint, b->joint, sizeof r.joint);
  return hal_storage_write(&r, sizeof r);
}

int hil_board_load_params(struct hil_board *b) {
  struct params_record r;
  if (hal_storage_read(&r, sizeof r) != 0 || r.magic != PARAMS_MAGIC || r.kind != b->kind ||
      r.n_joints != b->n_joints || r.cmd_timeout_ms < HIL_CMD_TIMEOUT_MS_MIN ||
      r.cmd_timeout_ms > HIL_CMD_TIMEOUT_MS_MAX) {
    b->faults |= HIL_F_PARAMS_DEFAULTED;   /* none saved, or not this board's: the port's defaults */
    return -1;
  }
  b->cmd_timeout_ms = r.cmd_timeout_ms;
  b->idle_state_hz = r.idle_state_hz;
  b->link_timeout_ms = r.link_timeout_ms;
  b->watchdog_action = r.watchdog_action;
  b->relax_after_ms = r.relax_after_ms;
  memcpy(b->joint, r.joint, sizeof r.joint);
  return 0;
}

/* ------------------------------------------------------------------ one frame */
static int replay(struct hil_board *b, uint16_t seq) {
  for (int i = 0; i < HIL_TXN_CACHE; i++) {
    struct hil_txn *t = &b->txn[i];
    if (t->used && t->seq == seq) {  /* a retransmission: the same answer, not executed twice */
      send(b, t->msg_id, t->reply, t->len);
      return 1;
    }
  }
  return 0;
}

static void on_frame(void *ctx, const uint8_t *body, size_t len) {
  struct hil_board *b = (struct hil_board *)ctx;
  uint8_t flags = body[0] & 0x0Fu, id = body[1];
  uint16_t seq = rd16(body + 2);
  const uint8_t *p = body + 4;
  size_t n = len - HIL_MIN_BODY;
  int txn = (flags & HIL_FLAG_ACK_REQ) != 0;
  uint8_t out[48];
  b->t_last_rx = b->now;
  int ok = hil_payload_ok(id, p, n);
  if (ok < 0) { b->stats.unknown_id++; return; }
  if (ok == 0) { b->stats.bad_payload++; return; }   /* a known message, too short to decode */
  if (txn && (flags & HIL_FLAG_RETX) && replay(b, seq)) return;
  switch (id) {
    case HIL_M_HELLO: {
      uint8_t *q = out;
      *q++ = HIL_PROTOCOL_MAJOR; *q++ = HIL_PROTOCOL_MINOR; *q++ = b->kind; *q++ = b->n_joints;
      *q++ = HIL_FW_MAJOR; *q++ = HIL_FW_MINOR; q = wr16(q, HIL_FW_PATCH); q = wr32(q, 0);
      q = wr32(q, HIL_SCHEMA_HASH); q = wr32(q, b->boot_id); q = wr32(q, rd32(p + 6));
      q = wr32(q, b->capabilities); *q++ = HIL_MAX_BODY;
      hal_unique_id(q); q += 12;
      send(b, HIL_M_HELLO_REPLY, out, (size_t)(q - out));
      return;
    }
    case HIL_M_CMD_POS: on_command(b, p, seq, 4); return;
    case HIL_M_CMD_PVF: on_command(b, p, seq, 8); return;
    case HIL_M_HEARTBEAT: return;
    case HIL_M_ESTOP: estop(b); send_state(b); return;
    case HIL_M_ENABLE: ack(b, id, seq, txn, react(b, HIL_REQ_ENABLE, 0)); return;
    case HIL_M_DISABLE: ack(b, id, seq, txn, react(b, HIL_REQ_DISABLE, 0)); return;
    case HIL_M_CLEAR_FAULT: ack(b, id, seq, txn, react(b, HIL_REQ_CLEAR_FAULT, rd32(p))); return;
    case HIL_M_REBOOT: {
      if (rd32(p) != HIL_REBOOT_MAGIC) { ack(b, id, seq, txn, HIL_ACK_BAD_MAGIC); return; }
      uint8_t result = HIL_RULES[HIL_REQ_REBOOT][b->state < HIL_N_STATES ? b->state : HIL_BOOT].result;
      ack(b, id, seq, txn, result);
      if (result == HIL_ACK_OK) hal_reset();
      return;
    }
    case HIL_M_HOME: {
      if (!kind_has(b, HIL_KINDS_NEED_HOMING)) { ack(b, id, seq, txn, HIL_ACK_UNSUPPORTED); return; }
      uint8_t result = react(b, HIL_REQ_HOME, 0);
      if (result == HIL_ACK_OK) {
        if (hal_home(rd32(p), p[4]) != 0) { ack(b, id, seq, txn, HIL_ACK_UNSUPPORTED); return; }
        b->faults &= ~(uint32_t)HIL_F_NOT_HOMED;
        hal_command_frame(b->target, b->n_joints);
      }
      ack(b, id, seq, txn, result);
      return;
    }
    case HIL_M_TSYNC_REQ: {
      uint8_t *q = wr64(out, rd64(p));
      q = wr64(q, t_us(b));
      q = wr64(q, hal_micros());
      send(b, HIL_M_TSYNC_RESP, out, (size_t)(q - out));
      return;
    }
    case HIL_M_PARAM_GET: {
      uint16_t pid = rd16(p);
      if (p[2] == HIL_JOINT_ALL) {
        for (uint8_t j = 0; j < b->n_joints; j++) send(b, HIL_M_PARAM_VALUE, out, param_value(b, pid, j, HIL_ACK_OK, out));
      } else {
        reply(b, seq, txn, HIL_M_PARAM_VALUE, out, param_value(b, pid, p[2], HIL_ACK_OK, out));
      }
      return;
    }
    case HIL_M_PARAM_SET:
      reply(b, seq, txn, HIL_M_PARAM_VALUE, out, param_set(b, p, out));
      return;
    case HIL_M_PARAM_SAVE: {
      if (rd32(p) != HIL_SAVE_MAGIC) { ack(b, id, seq, txn, HIL_ACK_BAD_MAGIC); return; }
      uint8_t result = react(b, HIL_REQ_PARAM_SAVE, 0);
      ack(b, id, seq, txn, result != HIL_ACK_OK ? result : (save_params(b) == 0 ? HIL_ACK_OK : HIL_ACK_UNSUPPORTED));
      return;
    }
    default:
      return;                                      /* the board's own messages: nothing to do */
  }
}

/* ------------------------------------------------------------------ the public part */
void hil_board_boot(struct hil_board *b, uint64_t now_us) {
  b->boot_id = hal_random32();
  if (b->boot_id == 0) b->boot_id = 1;
  b->state = HIL_DISABLED;
  b->faults = 0;
  b->now = now_us;
  b->t_last_cmd = b->t_last_rx = now_us;
  b->t_last_idle = b->t_last_heartbeat = 0;
  b->echo_seq = 0;
  memset(b->txn, 0, sizeof b->txn);
  memset(b->jflags, 0, sizeof b->jflags);
  hal_command_frame(b->target, b->n_joints);
  drive(b);
}

void hil_board_init(struct hil_board *b, uint8_t kind, uint8_t n_joints, uint64_t now_us) {
  memset(b, 0, sizeof *b);
  b->kind = kind;
  b->n_joints = n_joints > HIL_MAX_JOINTS ? HIL_MAX_JOINTS : n_joints;
  b->capabilities = 0;
  b->cmd_timeout_ms = HIL_DEFAULT_CMD_TIMEOUT_MS;
  b->idle_state_hz = HIL_DEFAULT_IDLE_STATE_HZ;
  b->link_timeout_ms = HIL_DEFAULT_LINK_TIMEOUT_MS;
  b->watchdog_action = HIL_DEFAULT_WATCHDOG_ACTION;
  b->relax_after_ms = HIL_DEFAULT_RELAX_AFTER_MS;
  for (uint8_t j = 0; j < HIL_MAX_JOINTS; j++) {
    b->joint[j].pos_min_urad = -3141593;
    b->joint[j].pos_max_urad = 3141593;
    b->joint[j].vel_max_mrad_s = 3000;
    b->joint[j].max_step_urad = 200000;
  }
  hil_board_boot(b, now_us);
}

void hil_board_rx(struct hil_board *b, const uint8_t *data, size_t len, uint64_t now_us) {
  b->now = now_us;
  hil_stream_feed(&b->rx, data, len, on_frame, b);
}

void hil_board_fault(struct hil_board *b, uint32_t faults) { react(b, HIL_REQ_HW_FAULT, faults); }

void hil_board_estop(struct hil_board *b) {
  if (b->state != HIL_ESTOP) estop(b);
}

static uint64_t period_us(uint32_t hz) { return hz ? 1000000u / hz : 10000000u; }

/* Microseconds from `then` to `now`, 0 when `now` reads earlier: a clock read a hair behind the
 * one that stamped `then` must not make the last command 584 000 years old (a watchdog trip). */
static uint64_t since(uint64_t now, uint64_t then) { return now > then ? now - then : 0u; }

void hil_board_tick(struct hil_board *b, uint64_t now_us) {
  b->now = now_us;
  if (b->state == HIL_ENABLED && since(now_us, b->t_last_cmd) > (uint64_t)b->cmd_timeout_ms * 1000u) {
    /* the host went quiet: latch the fault and hold where the joints are */
    react(b, HIL_REQ_WATCHDOG, 0);
    b->watchdog_trips++;
    send_state(b);
  } else if (torque(b)) {
    drive(b);
  }
  uint64_t idle = period_us(b->idle_state_hz);
  if (since(now_us, b->t_last_cmd) > idle && since(now_us, b->t_last_idle) >= idle) {
    b->t_last_idle = now_us;
    send_state(b);
  }
  if (since(now_us, b->t_last_heartbeat) >= 1000000u || b->t_last_heartbeat == 0) {
    b->t_last_heartbeat = now_us ? now_us : 1;
    send_heartbeat(b);
  }
}
