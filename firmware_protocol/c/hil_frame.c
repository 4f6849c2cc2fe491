/* SPEC.md §2 framing: CRC-32/ISO-HDLC, COBS, the receiver rules. No allocation, no floats. */
#define HIL_WANT_PAYLOAD_SIZES
#include "hil_fw.h"

#include <string.h>

/* a 16-entry (nibble) table: 64 bytes of flash instead of 1 KB, two lookups a byte */
static const uint32_t crc_nibble[16] = {
  0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
  0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu, 0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

uint32_t hil_crc32(const uint8_t *data, size_t len) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < len; i++) {
    crc ^= data[i];
    crc = (crc >> 4) ^ crc_nibble[crc & 0x0Fu];
    crc = (crc >> 4) ^ crc_nibble[crc & 0x0Fu];
  }
  return crc ^ 0xFFFFFFFFu;
}

size_t hil_cobs_encode(const uint8_t *in, size_t len, uint8_t *out) {
  size_t code_at = 0, o = 1;
  uint8_t code = 1;
  for (size_t i = 0; i < len; i++) {
    if (in[i] == 0) {
      out[code_at] = code;
      code_at = o++;
      code = 1;
    } else {
      out[o++] = in[i];
      if (++code == 0xFF) {
        out[code_at] = code;
        code_at = o++;
        code = 1;
        if (i + 1 == len) { /* a full block at the very end needs no closing block */
          return o - 1;
        }
      }
    }
  }
  out[code_at] = code;
  return o;
}

int hil_cobs_decode(const uint8_t *in, size_t len, uint8_t *out, size_t out_cap) {
  size_t i = 0, o = 0;
  while (i < len) {
    uint8_t code = in[i++];
    if (code == 0) return -1;
    for (uint8_t k = 1; k < code; k++) {
      if (i >= len || in[i] == 0 || o >= out_cap) return -1;
      out[o++] = in[i++];
    }
    if (i < len && code != 0xFF) {
      if (o >= out_cap) return -1;
      out[o++] = 0;
    }
  }
  return (int)o;
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

int hil_check_body(const uint8_t *body, size_t len) {
  if (len < HIL_MIN_BODY) return HIL_BODY_SHORT;
  if (hil_crc32(body, len - 4) != rd32(body + len - 4)) return HIL_BODY_CRC;
  if ((body[0] >> 4) != HIL_PROTOCOL_MAJOR) return HIL_BODY_VERSION;
  if (body[0] & HIL_FLAG_RESERVED) return HIL_BODY_FLAGS;
  return HIL_BODY_OK;
}

static void chunk(struct hil_stream *s, const uint8_t *c, size_t len, hil_frame_fn on_frame, void *ctx) {
  uint8_t body[HIL_MAX_BODY + 1];
  if (len > HIL_MAX_BODY + 1) { s->stats.too_long++; return; }
  int n = hil_cobs_decode(c, len, body, sizeof body);
  if (n < 0) { s->stats.cobs++; return; }
  switch (hil_check_body(body, (size_t)n)) {
    case HIL_BODY_SHORT: s->stats.too_short++; return;
    case HIL_BODY_CRC: s->stats.crc++; return;
    case HIL_BODY_VERSION: s->stats.version++; return;
    case HIL_BODY_FLAGS: s->stats.reserved_flags++; return;
    default: break;
  }
  s->stats.frames++;
  on_frame(ctx, body, (size_t)n);
}

void hil_stream_feed(struct hil_stream *s, const uint8_t *data, size_t len, hil_frame_fn on_frame, void *ctx) {
  s->stats.bytes += (uint32_t)len;
  for (size_t i = 0; i < len; i++) {
    uint8_t c = data[i];
    if (c != 0) {
      if (s->overlong) continue;
      if (s->len >= HIL_MAX_BODY + 2) { s->overlong = 1; s->len = 0; continue; }
      s->buf[s->len++] = c;
      continue;
    }
    if (s->overlong) {
      s->stats.too_long++;
    } else if (s->len == 0) {
      s->stats.empty++;
    } else {
      chunk(s, s->buf, s->len, on_frame, ctx);
    }
    s->len = 0;
    s->overlong = 0;
  }
}

int hil_payload_ok(uint8_t msg_id, const uint8_t *p, size_t len) {
  /* the fixed part of each message (SPEC §4), then the per-joint part of the streaming ones */
  for (int i = 0; i < HIL_N_MESSAGES; i++) {
    const struct hil_payload_size *m = &HIL_PAYLOAD_SIZES[i];
    if (m->msg_id != msg_id) continue;
    if (len < m->fixed) return 0;
    if (m->n_at < 0) return 1;
    uint8_t n = p[m->n_at];
    return n <= HIL_MAX_JOINTS && len >= (size_t)m->fixed + (size_t)m->per_joint * n;
  }
  return -1;
}
