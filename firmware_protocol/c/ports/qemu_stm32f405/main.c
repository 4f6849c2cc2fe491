/* The firmware on QEMU's STM32F405 (`qemu-system-arm -M netduinoplus2`): the real ports' core,
 * start-up, clocks, SysTick clock, USART2 driver and main loop (ports/stm32f4/common.c, built with
 * HIL_QEMU: clock waits bounded, transmit polled, the core asleep between interrupts), and in place
 * of the servos — QEMU has no I2C, timers or GPIO to drive them — one simulated servo per joint
 * that follows its target as the host build's do (host/host_main.c), in integers.
 *
 * What the launcher (firmware_protocol/qemu_board.py) gives it, QEMU's loader puts in RAM before
 * the core starts: `struct launch` at LAUNCH_ADDR (board kind, joints, limits, where the robot
 * stands, hidden offsets and reversals, unique id, a seed). Without it the image boots as a
 * humanoid17 at home. Parameters saved with PARAM_SAVE live in RAM that a reset keeps, as flash
 * would: QEMU does not model the flash interface.
 */
#include <string.h>

#include "../../hal.h"
#include "../../hil_fw.h"
#include "../stm32f4/stm32f4.h"

#define LAUNCH_ADDR 0x2001F000u    /* the last 4 KB of RAM, kept out of the program by memmap_qemu.ld */
#define KEPT_ADDR 0x2001F400u      /* kept across resets: the boot counter, then the parameters */
#define LAUNCH_MAGIC 0x514C4948u   /* "HILQ" */
#define STORE_MAX 2048u

struct launch {
  uint32_t magic, version;
  uint8_t kind, n_joints, reserved[2];
  uint8_t uid[12];
  uint32_t seed, watchdog_ms, tau_us, supply_mv;
  int32_t max_step_urad;
  int32_t lower_urad[HIL_MAX_JOINTS], upper_urad[HIL_MAX_JOINTS], initial_urad[HIL_MAX_JOINTS];
  int32_t vmax_mrad_s[HIL_MAX_JOINTS], offset_urad[HIL_MAX_JOINTS];
  int8_t sign[HIL_MAX_JOINTS];
};

struct kept {
  uint32_t boots;
  uint32_t stored_len;
  uint8_t stored[STORE_MAX];
};

#define LAUNCH ((const struct launch *)LAUNCH_ADDR)
#define KEPT ((struct kept *)KEPT_ADDR)

static struct launch cfg;
static int32_t q[HIL_MAX_JOINTS], qd[HIL_MAX_JOINTS], target_b[HIL_MAX_JOINTS];
static uint8_t enabled;

/* without a launch block: humanoid17 standing at its zero pose, ±90°, 6 rad/s */
static void default_launch(void) {
  memset(&cfg, 0, sizeof cfg);
  cfg.kind = HIL_KIND_HUMANOID17;
  cfg.n_joints = 17;
  memcpy(cfg.uid, "QEMU-F405-01", 12);
  cfg.tau_us = 30000;
  cfg.supply_mv = 7400;
  cfg.max_step_urad = 200000;
  for (int j = 0; j < HIL_MAX_JOINTS; j++) {
    cfg.lower_urad[j] = -1570796;
    cfg.upper_urad[j] = 1570796;
    cfg.vmax_mrad_s[j] = 6000;
    cfg.sign[j] = 1;
  }
}

static void read_launch(void) {
  if (LAUNCH->magic == LAUNCH_MAGIC && LAUNCH->version == 1u && LAUNCH->n_joints >= 1u &&
      LAUNCH->n_joints <= HIL_MAX_JOINTS) {
    memcpy(&cfg, LAUNCH, sizeof cfg);
  } else {
    default_launch();
  }
  for (int j = 0; j < cfg.n_joints; j++) q[j] = cfg.initial_urad[j];
}

/* ------------------------------------------------------------------ the simulated servos (the HAL) */
int hal_read_imu(int16_t quat[4], int16_t gyro_mrad_s[3], int16_t acc_mm_s2[3]) {
  (void)quat; (void)gyro_mrad_s; (void)acc_mm_s2;
  return 0;
}
uint16_t hal_supply_mv(void) { return (uint16_t)cfg.supply_mv; }
void hal_unique_id(uint8_t uid[12]) { memcpy(uid, cfg.uid, 12); }

uint32_t hal_random32(void) {
  /* the boot id differs from the last boot's: the launch's seed and a count of boots */
  uint32_t x = cfg.seed ^ (KEPT->boots * 2654435761u) ^ (SYST_CVR << 16) ^ stm32_ms;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return x ? x : 1u;
}

int hal_storage_read(void *data, size_t len) {
  if (KEPT->stored_len != len || len > STORE_MAX) return -1;
  memcpy(data, KEPT->stored, len);
  return 0;
}

int hal_storage_write(const void *data, size_t len) {
  if (len > STORE_MAX) return -1;
  memcpy(KEPT->stored, data, len);
  KEPT->stored_len = (uint32_t)len;
  return 0;
}

int hal_home(uint32_t joint_mask, uint8_t method) { (void)joint_mask; (void)method; return 0; }

void hal_command_frame(int32_t *pos, uint8_t n) {
  for (uint8_t j = 0; j < n && j < cfg.n_joints; j++) pos[j] = q[j] + cfg.offset_urad[j];
}

static int16_t clamp16(int64_t v) { return (int16_t)(v > 32767 ? 32767 : (v < -32768 ? -32768 : v)); }

void hal_read_joints(int32_t *pos, int16_t *vel, int16_t *cur, int8_t *temp, uint8_t *flags, uint8_t n) {
  for (uint8_t j = 0; j < n && j < cfg.n_joints; j++) {
    pos[j] = cfg.sign[j] * q[j] + cfg.offset_urad[j];
    vel[j] = clamp16((int64_t)cfg.sign[j] * qd[j]);                      /* µrad per ms = mrad/s */
    /* a servo's current grows with how far it is from its target: 2 mA per mrad */
    cur[j] = enabled ? clamp16(((int64_t)target_b[j] - cfg.offset_urad[j] - q[j]) / 500) : 0;
    temp[j] = 35;
    flags[j] = 0;
  }
}

void hal_write_joints(const int32_t *target, uint8_t n, uint8_t on) {
  for (uint8_t j = 0; j < n && j < cfg.n_joints; j++) target_b[j] = target[j];
  enabled = on;
}

/* every 1 ms: each servo a first-order lag toward its target, at most its speed */
static void servo_period(void) {
  for (int j = 0; j < cfg.n_joints; j++) {
    if (!enabled) {
      qd[j] = 0;
      continue;
    }
    int64_t err = (int64_t)target_b[j] - cfg.offset_urad[j] - q[j];
    int64_t dq = cfg.tau_us > 1000u ? err * 1000 / (int64_t)cfg.tau_us : err;
    int64_t lim = cfg.vmax_mrad_s[j];                                     /* mrad/s = µrad per ms */
    if (dq > lim) dq = lim;
    if (dq < -lim) dq = -lim;
    q[j] += (int32_t)dq;
    qd[j] = (int32_t)dq;
  }
}

int main(void) {
  stm32_clock_init(0u);
  read_launch();
  KEPT->boots++;
  stm32_host_link_init();
  struct hil_board *b = stm32_board();
  hil_board_init(b, cfg.kind, cfg.n_joints, 0);
  b->supply_mv = (uint16_t)cfg.supply_mv;
  for (int j = 0; j < cfg.n_joints; j++) {
    b->joint[j].pos_min_urad = cfg.lower_urad[j];
    b->joint[j].pos_max_urad = cfg.upper_urad[j];
    b->joint[j].vel_max_mrad_s = cfg.vmax_mrad_s[j];
    b->joint[j].max_step_urad = cfg.max_step_urad;
  }
  if (cfg.watchdog_ms) b->cmd_timeout_ms = cfg.watchdog_ms;
  if (KEPT->stored_len) hil_board_load_params(b);   /* what PARAM_SAVE kept, if any */
  stm32_watchdog_init();
  stm32_run(servo_period);
}
