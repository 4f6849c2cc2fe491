/* Host-build cost of the firmware's cycle for 17 joints: one CMD_POS received (framing, CRC,
 * decode, limits and step clamp) and one STATE sent (assembly, CRC, COBS), with a HAL that does
 * nothing. Prints ns per cycle. benchmarks/bench_firmware.py runs it; on QEMU's Cortex-M4 (`make
 * qemu`, run under -icount shift=0) the nanoseconds are instructions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#ifdef HIL_SEMIHOSTING
uint64_t qemu_now_ns(void);   /* ports/qemu_stm32f405/semihost.c */
static double elapsed_ns(uint64_t t0) { return (double)(qemu_now_ns() - t0); }
static uint64_t start_ns(void) { return qemu_now_ns(); }
#else
static uint64_t start_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
static double elapsed_ns(uint64_t t0) { return (double)(start_ns() - t0); }
#endif
#ifndef HIL_BENCH_REPS
#define HIL_BENCH_REPS 200000
#endif

#include "../hal.h"
#include "../hil_fw.h"

static size_t sent;
size_t hal_uart_write(const uint8_t *data, size_t len) { (void)data; sent += len; return len; }
uint64_t hal_micros(void) { return 0; }
void hal_read_joints(int32_t *pos, int16_t *vel, int16_t *cur, int8_t *temp, uint8_t *flags, uint8_t n) {
  for (uint8_t j = 0; j < n; j++) { pos[j] = 1000 * j; vel[j] = 0; cur[j] = 0; temp[j] = 30; flags[j] = 0; }
}
void hal_command_frame(int32_t *pos, uint8_t n) { for (uint8_t j = 0; j < n; j++) pos[j] = 1000 * j; }
void hal_write_joints(const int32_t *t, uint8_t n, uint8_t on) { (void)t; (void)n; (void)on; }
int hal_read_imu(int16_t quat[4], int16_t gyro_mrad_s[3], int16_t acc_mm_s2[3]) {
  (void)quat; (void)gyro_mrad_s; (void)acc_mm_s2;
  return 0;
}
uint16_t hal_supply_mv(void) { return 7400; }
void hal_unique_id(uint8_t uid[12]) { memset(uid, 1, 12); }
uint32_t hal_random32(void) { return 42; }
int hal_storage_read(void *d, size_t l) { (void)d; (void)l; return -1; }
int hal_storage_write(const void *d, size_t l) { (void)d; (void)l; return 0; }
int hal_home(uint32_t m, uint8_t k) { (void)m; (void)k; return 0; }
void hal_reset(void) {}

static size_t frame(uint8_t id, uint16_t seq, uint8_t flags, const uint8_t *p, size_t n, uint8_t *wire) {
  uint8_t body[HIL_MAX_BODY];
  body[0] = (uint8_t)((HIL_PROTOCOL_MAJOR << 4) | flags); body[1] = id; body[2] = (uint8_t)seq; body[3] = (uint8_t)(seq >> 8);
  memcpy(body + 4, p, n);
  uint32_t crc = hil_crc32(body, 4 + n);
  for (int k = 0; k < 4; k++) body[4 + n + k] = (uint8_t)(crc >> (8 * k));
  wire[0] = 0;
  size_t w = hil_cobs_encode(body, n + 8, wire + 1);
  wire[w + 1] = 0;
  return w + 2;
}

int main(int argc, char **argv) {
  long reps = argc > 1 ? atol(argv[1]) : HIL_BENCH_REPS;
  static struct hil_board b;
  hil_board_init(&b, HIL_KIND_HUMANOID17, 17, 0);
  uint8_t wire[HIL_TX_BUF], p[6 + 4 * 17];
  size_t w = frame(0x10, 1, 1, (const uint8_t[]){0xFF, 0xFF, 0xFF, 0xFF, 0}, 5, wire);
  hil_board_rx(&b, wire, w, 0);                          /* ENABLE */
  p[0] = 17; p[1] = 0; p[2] = p[3] = p[4] = p[5] = 0xFF;
  for (int j = 0; j < 17; j++) { int32_t v = 1000 * j + 500; memcpy(p + 6 + 4 * j, &v, 4); }
  w = frame(0x20, 2, 0, p, sizeof p, wire);
  uint64_t t0 = start_ns();
  for (long k = 0; k < reps; k++) hil_board_rx(&b, wire, w, (uint64_t)k);
  double ns = elapsed_ns(t0) / (double)reps;
  printf("%.1f ns per CMD_POS in + STATE out (17 joints), %lu bytes in, %lu bytes out per cycle, state %u, "
         "applied %lu, board struct %lu bytes\n", ns, (unsigned long)w, (unsigned long)(sent / (size_t)reps), b.state,
         (unsigned long)b.applied, (unsigned long)sizeof b);
  return b.applied == (uint32_t)reps ? 0 : 1;
}
