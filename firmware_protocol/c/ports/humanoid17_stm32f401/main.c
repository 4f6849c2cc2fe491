/* HUMANOID17 board: an STM32F401 ("Black Pill") driving 17 hobby servos through two PCA9685 PWM
 * boards on I²C1 (PB6 SCL, PB7 SDA; addresses 0x40 for joints 0–15, 0x41 for joint 16), the host
 * on the board's USB-C socket as a CDC serial port (or, built with HOST_LINK=uart, on USART2: PA2
 * TX, PA3 RX at 1 Mbaud through a USB-UART bridge). Compiled, not run on hardware.
 *
 * Hobby servos report no position: the firmware reports the commanded pulse after its own rate
 * limit as measured and sets HIL_CAP_POSITION_ESTIMATED. A servo with an analog feedback wire
 * (the pot's wiper) wired to an ADC pin is read instead: set its channel in FEEDBACK below.
 */
#include <string.h>

#include "../../hal.h"
#include "../../hil_fw.h"
#include "../stm32f4/stm32f4.h"

#define N 17
#define HSE_MHZ 25u                      /* the Black Pill's crystal */
#define PCA_A 0x40u
#define PCA_B 0x41u
#define SERVO_FRAME_MS 20u               /* hobby servos take a pulse every 20 ms (50 Hz) */

/* per joint: pulse at angle 0 (µs), µs per rad × 1000 (2000 µs over 180° = 636 620), direction,
 * limits (µrad; the robot's own, humanoid17.toml), and the ADC channel of a feedback wire (-1 none) */
static const int32_t ZERO_US[N] = {1500, 1500, 1500, 1500, 1500, 1500, 1500, 1500, 1500, 1500, 1500, 1500, 1500,
                                   1500, 1500, 1500, 1500};
static const int32_t US_PER_RAD_X1000 = 636620;
static const int8_t DIRECTION[N] = {1, 1, 1, 1, 1, -1, -1, -1, -1, -1, 1, 1, 1, -1, -1, -1, 1};
static const int32_t LIMIT_MIN[N] = {-436332, -1047198, -453786, -1396263, -610865, -436332, -1047198, -453786,
                                     -1396263, -610865, -1570796, -261799, -2094395, -1570796, -261799, -2094395,
                                     -1570796};
static const int32_t LIMIT_MAX[N] = {785398, 1570796, 1570796, 1396263, 610865, 785398, 1570796, 1570796, 1396263,
                                     610865, 1570796, 1570796, 261799, 1570796, 1570796, 261799, 1570796};
static const int8_t FEEDBACK[N] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
static const int32_t FEEDBACK_URAD_PER_COUNT = 1150;   /* a 270° pot over 4096 counts */

static int32_t target[N], commanded[N], rate[N];   /* µrad, µrad, mrad/s */
static uint8_t enabled, bus_error;
static uint32_t frame_ms;

/* ------------------------------------------------------------------ I²C1, blocking, with timeouts */
static int i2c_wait(uint32_t bit) {
  for (uint32_t k = 0; k < 20000u; k++)
    if (I2C_SR1(I2C1) & bit) return 0;
  return -1;
}

static int i2c_write(uint8_t addr, const uint8_t *data, size_t len) {
  I2C_CR1(I2C1) |= 1u << 8;                                   /* START */
  if (i2c_wait(1u << 0)) return -1;                           /* SB */
  I2C_DR(I2C1) = (uint32_t)addr << 1;
  if (i2c_wait(1u << 1)) { I2C_CR1(I2C1) |= 1u << 9; return -1; }   /* ADDR, else STOP */
  (void)I2C_SR2(I2C1);
  for (size_t i = 0; i < len; i++) {
    if (i2c_wait(1u << 7)) { I2C_CR1(I2C1) |= 1u << 9; return -1; } /* TXE */
    I2C_DR(I2C1) = data[i];
  }
  int r = i2c_wait(1u << 2);                                  /* BTF */
  I2C_CR1(I2C1) |= 1u << 9;                                   /* STOP */
  return r;
}

static void i2c_init(void) {
  RCC_APB1ENR |= 1u << 21;
  stm32_gpio_af(GPIOB, 6, 4);
  stm32_gpio_af(GPIOB, 7, 4);
  REG(GPIOB + 0x04) |= (1u << 6) | (1u << 7);                /* open drain */
  I2C_CR2(I2C1) = 42u;                                        /* APB1 42 MHz */
  I2C_CCR(I2C1) = (1u << 15) | 35u;                           /* fast mode, 400 kHz */
  I2C_TRISE(I2C1) = 13u;
  I2C_CR1(I2C1) = 1u;
}

static void pca_init(uint8_t addr) {
  uint8_t sleep[2] = {0x00, 0x10}, prescale[2] = {0xFE, 121}, wake[2] = {0x00, 0x20};   /* 50 Hz, auto-increment */
  bus_error |= (uint8_t)(i2c_write(addr, sleep, 2) | i2c_write(addr, prescale, 2) | i2c_write(addr, wake, 2));
}

/* 16 channels' ON/OFF counts in one auto-incremented write; a channel off sends no pulses */
static void pca_write(uint8_t addr, int first, int count) {
  uint8_t buf[1 + 4 * 16];
  buf[0] = 0x06;                                              /* LED0_ON_L */
  for (int k = 0; k < count; k++) {
    int j = first + k;
    uint32_t off = 0;
    uint8_t full_off = 1;
    if (enabled) {
      int64_t us = ZERO_US[j] + (int64_t)DIRECTION[j] * commanded[j] * US_PER_RAD_X1000 / 1000000000;
      off = (uint32_t)(us * 4096 / 20000);                   /* counts of the 20 ms frame */
      full_off = 0;
    }
    buf[1 + 4 * k] = 0;
    buf[2 + 4 * k] = 0;
    buf[3 + 4 * k] = (uint8_t)off;
    buf[4 + 4 * k] = (uint8_t)((off >> 8) | (full_off ? 0x10u : 0u));
  }
  if (i2c_write(addr, buf, (size_t)(1 + 4 * count))) bus_error = 1;
}

/* ------------------------------------------------------------------ ADC for feedback wires */
static uint16_t adc_read(int ch) {
  ADC_SQR3 = (uint32_t)ch;
  ADC_CR2 |= 1u << 30;                                        /* SWSTART */
  for (uint32_t k = 0; k < 10000u && !(ADC_SR & 2u); k++) {
  }
  return (uint16_t)ADC_DR;
}

/* ------------------------------------------------------------------ the HAL */
/* no IMU fitted: a port with one (an MPU-6050 on I2C, say) fills these */
int hal_read_imu(int16_t quat[4], int16_t gyro_mrad_s[3], int16_t acc_mm_s2[3]) {
  (void)quat; (void)gyro_mrad_s; (void)acc_mm_s2;
  return 0;
}
uint16_t hal_supply_mv(void) { return 7400; }
int hal_home(uint32_t joint_mask, uint8_t method) { (void)joint_mask; (void)method; return -1; }

void hal_command_frame(int32_t *pos, uint8_t n) {
  for (uint8_t j = 0; j < n && j < N; j++) pos[j] = commanded[j];
}

void hal_read_joints(int32_t *pos, int16_t *vel, int16_t *cur, int8_t *temp, uint8_t *flags, uint8_t n) {
  for (uint8_t j = 0; j < n && j < N; j++) {
    pos[j] = FEEDBACK[j] >= 0 ? (adc_read(FEEDBACK[j]) - 2048) * FEEDBACK_URAD_PER_COUNT : commanded[j];
    vel[j] = (int16_t)rate[j];
    cur[j] = 0;
    temp[j] = 0;
    flags[j] = 0;
  }
}

void hal_write_joints(const int32_t *t, uint8_t n, uint8_t on) {
  for (uint8_t j = 0; j < n && j < N; j++) target[j] = t[j];
  enabled = on;
}

/* every 1 ms: the commanded pulse moves toward the target at the joint's speed limit */
static void servo_period(void) {
  struct hil_board *b = stm32_board();
  for (int j = 0; j < N; j++) {
    int32_t step = b->joint[j].vel_max_mrad_s;                 /* mrad/s = µrad per ms */
    int32_t d = enabled ? target[j] - commanded[j] : 0;
    if (d > step) d = step;
    if (d < -step) d = -step;
    commanded[j] += d;
    rate[j] = d;                                              /* µrad per ms = mrad/s */
  }
  if (++frame_ms >= SERVO_FRAME_MS) {
    frame_ms = 0;
    pca_write(PCA_A, 0, 16);
    pca_write(PCA_B, 16, 1);
    if (bus_error) {
      hil_board_fault(b, HIL_F_SERVO_BUS);                    /* a PCA9685 did not answer */
      bus_error = 0;
    }
  }
}

int main(void) {
  stm32_clock_init(HSE_MHZ);
  stm32_host_link_init();
  i2c_init();
  RCC_APB2ENR |= 1u << 8;                                     /* ADC1, for feedback wires */
  ADC_SMPR2 = 0x3FFFFFFFu;
  ADC_CR2 = 1u;
  pca_init(PCA_A);
  pca_init(PCA_B);
  struct hil_board *b = stm32_board();
  hil_board_init(b, HIL_KIND_HUMANOID17, N, 0);
  b->capabilities = HIL_CAP_POSITION_ESTIMATED;
  b->supply_mv = 7400;
  for (int j = 0; j < N; j++) {
    b->joint[j].pos_min_urad = LIMIT_MIN[j];
    b->joint[j].pos_max_urad = LIMIT_MAX[j];
    b->joint[j].vel_max_mrad_s = 6000;
    b->joint[j].max_step_urad = 200000;
  }
  hil_board_load_params(b);   /* the limits and timeouts saved with PARAM_SAVE, if any */
  stm32_watchdog_init();
  stm32_run(servo_period);
}
