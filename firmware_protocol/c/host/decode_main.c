/* The differential test's C side: streams on stdin as [u32 LE length][bytes]; each is fed to a
 * fresh receiver in two chunks (split at length/3) and answered with one line: every accepted
 * frame as "msg_id.seq.flags.decodes.crc32(payload)", then "|" and the receiver's counters
 * (frames crc cobs too_short too_long version reserved_flags empty). tests/integration/
 * test_c_firmware.py prints the same line from firmware_protocol.frame and compares. The same
 * program runs on QEMU's Cortex-M4 (`make qemu`, ports/qemu_stm32f405/semihost.c) with a buffer
 * that fits its RAM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hil_fw.h"

static char line[1 << 16];
static size_t at;

static void on_frame(void *ctx, const uint8_t *body, size_t len) {
  (void)ctx;
  const uint8_t *p = body + 4;
  size_t n = len - HIL_MIN_BODY;
  int ok = hil_payload_ok(body[1], p, n);
  if (at < sizeof line - 64)
    at += (size_t)snprintf(line + at, sizeof line - at, "%u.%u.%u.%d.%08x ", body[1], body[2] | (body[3] << 8),
                           body[0] & 0x0Fu, ok > 0, (unsigned)hil_crc32(p, n));
}

#ifndef HIL_DECODE_BUF
#define HIL_DECODE_BUF (1 << 20)
#endif

int main(void) {
  static uint8_t buf[HIL_DECODE_BUF];
  uint8_t hdr[4];
  while (fread(hdr, 1, 4, stdin) == 4) {
    size_t len = (size_t)hdr[0] | ((size_t)hdr[1] << 8) | ((size_t)hdr[2] << 16) | ((size_t)hdr[3] << 24);
    if (len > sizeof buf || fread(buf, 1, len, stdin) != len) return 1;
    struct hil_stream s;
    memset(&s, 0, sizeof s);
    at = 0;
    hil_stream_feed(&s, buf, len / 3, on_frame, NULL);
    hil_stream_feed(&s, buf + len / 3, len - len / 3, on_frame, NULL);
    struct hil_rx_stats *t = &s.stats;
    printf("%s| %u %u %u %u %u %u %u %u\n", line, (unsigned)t->frames, (unsigned)t->crc, (unsigned)t->cobs,
           (unsigned)t->too_short, (unsigned)t->too_long, (unsigned)t->version, (unsigned)t->reserved_flags,
           (unsigned)t->empty);
    line[0] = 0;
  }
  return 0;
}
