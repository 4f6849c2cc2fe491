/* PUMA6 retrofit controller: an STM32F407 in place of the original Unimate controller — six
 * quadrature encoders in hardware timers, a PID position loop per joint at 1 kHz driving PWM/DIR
 * motor amplifiers, brakes, limit switches, an e-stop chain and the amplifiers' fault line; the
 * host on USB (the OTG_FS micro-USB socket, PA11/PA12, as a CDC serial port; or, built with
 * HOST_LINK=uart, USART2 PA2/PA3 at 1 Mbaud). Compiled, not run on hardware.
 *
 * Pins: encoders TIM1 (PE9/PE11), TIM2 (PA15/PB3), TIM3 (PA6/PA7), TIM4 (PD12/PD13), TIM5 (PA0/PA1),
 * TIM8 (PC6/PC7); PWM 20 kHz on TIM9 CH1/CH2 (PE5/PE6), TIM12 CH1/CH2 (PB14/PB15), TIM10 CH1 (PB8),
 * TIM11 CH1 (PB9); DIR PD0–PD5; amplifier enable PD6; brake release PD7 (high: released);
 * limit switches PE0–PE5 (to ground when hit); e-stop chain PE7 (closed to ground: ok, open:
 * e-stop); amplifier fault PE8 (low: fault).
 */
#include "../../hal.h"
#include "../../hil_fw.h"
#include "../stm32f4/stm32f4.h"

#define N 6
#define HSE_MHZ 8u                       /* the F407 Discovery's crystal; set yours */
#define PWM_TOP 4199u            /* 84 MHz / 20 kHz − 1 */

static const uint32_t ENC[N] = {TIM1, TIM2, TIM3, TIM4, TIM5, TIM8};
/* encoder counts per radian of the joint: 250-line encoders (1000 counts) × the gear ratios of
 * the PUMA 560 (62.6, 107.8, 53.7, 76.0, 71.9, 76.7) / 2π; set these from your arm */
static const int32_t COUNTS_PER_RAD_X1000[N] = {9963099, 17156960, 8546620, 12095775, 11443240, 12207325};
static const uint32_t PWM_TIM[N] = {TIM9, TIM9, TIM12, TIM12, 0x40014400u /* TIM10 */, 0x40014800u /* TIM11 */};
static const uint8_t PWM_CH[N] = {1, 2, 1, 2, 1, 1};
/* PID gains in duty counts per µrad (× 2^-16), per µrad·s, per µrad/s */
static const int32_t KP[N] = {900, 1200, 900, 300, 300, 200}, KI[N] = {2, 3, 2, 1, 1, 1}, KD[N] = {40, 60, 40, 10, 10, 8};
static const int32_t DUTY_MAX = 3800;                          /* of PWM_TOP: 90 % */

static int32_t target[N], position[N], last_position[N], velocity[N], duty[N];
static int64_t integral[N];
static uint16_t last_count[N];
static int32_t counts[N];
static uint8_t enabled;
/* the home pose (µrad): where the arm stands when HOME (method 0) is asked */
static const int32_t HOME_POSE[N] = {0, -1571000, 1571000, 0, 0, 0};

int hal_home(uint32_t joint_mask, uint8_t method) {
  if (method != 0) return -1;                                 /* index-pulse homing: not in this port */
  for (int j = 0; j < N; j++) {
    if (!((joint_mask >> j) & 1u)) continue;
    counts[j] = (int32_t)((int64_t)HOME_POSE[j] * COUNTS_PER_RAD_X1000[j] / 1000000000);
    position[j] = last_position[j] = HOME_POSE[j];
  }
  return 0;
}

static void encoder_init(uint32_t t) {
  TIM_SMCR(t) = 3u;                                           /* encoder mode 3: both edges of both channels */
  TIM_CCMR1(t) = 1u | (1u << 8) | (3u << 4) | (3u << 12);     /* CC1S=TI1, CC2S=TI2, filters */
  TIM_ARR(t) = 0xFFFFu;
  TIM_CR1(t) = 1u;
}

static void pwm_init(uint32_t t, uint8_t ch) {
  TIM_PSC(t) = 0;
  TIM_ARR(t) = PWM_TOP;
  if (ch == 1) TIM_CCMR1(t) |= (6u << 4) | (1u << 3);          /* PWM mode 1, preload */
  else TIM_CCMR1(t) |= (6u << 12) | (1u << 11);
  TIM_CCER(t) |= 1u << (4 * (ch - 1));
  TIM_CR1(t) = 1u;
}

static void pins_init(void) {
  RCC_APB1ENR |= (1u << 0) | (1u << 1) | (1u << 2) | (1u << 3) | (1u << 6);   /* TIM2 3 4 5 12 */
  RCC_APB2ENR |= (1u << 0) | (1u << 1) | (1u << 16) | (1u << 17) | (1u << 18);   /* TIM1 8 9 10 11 */
  stm32_gpio_af(GPIOE, 9, 1); stm32_gpio_af(GPIOE, 11, 1);
  stm32_gpio_af(GPIOA, 15, 1); stm32_gpio_af(GPIOB, 3, 1);
  stm32_gpio_af(GPIOA, 6, 2); stm32_gpio_af(GPIOA, 7, 2);
  stm32_gpio_af(GPIOD, 12, 2); stm32_gpio_af(GPIOD, 13, 2);
  stm32_gpio_af(GPIOA, 0, 2); stm32_gpio_af(GPIOA, 1, 2);
  stm32_gpio_af(GPIOC, 6, 3); stm32_gpio_af(GPIOC, 7, 3);
  stm32_gpio_af(GPIOE, 5, 3); stm32_gpio_af(GPIOE, 6, 3);
  stm32_gpio_af(GPIOB, 14, 9); stm32_gpio_af(GPIOB, 15, 9);
  stm32_gpio_af(GPIOB, 8, 3); stm32_gpio_af(GPIOB, 9, 3);
  for (unsigned p = 0; p < 8; p++) stm32_gpio_mode(GPIOD, p, 1u, 0u);      /* DIR, enable, brake: outputs */
  for (unsigned p = 0; p < 9; p++) if (p != 6) stm32_gpio_mode(GPIOE, p, 0u, 1u);   /* inputs, pull-up */
  for (int j = 0; j < N; j++) {
    encoder_init(ENC[j]);
    pwm_init(PWM_TIM[j], PWM_CH[j]);
  }
  TIM_BDTR(TIM1) |= 1u << 15;
}

static void outputs(void) {
  for (int j = 0; j < N; j++) {
    int32_t d = enabled ? duty[j] : 0;
    GPIO_BSRR(GPIOD) = d < 0 ? (1u << j) : (1u << (j + 16));
    TIM_CCR(PWM_TIM[j], PWM_CH[j]) = (uint32_t)(d < 0 ? -d : d);
  }
  GPIO_BSRR(GPIOD) = enabled ? ((1u << 6) | (1u << 7)) : ((1u << 22) | (1u << 23));   /* amps on, brakes off */
}

/* ------------------------------------------------------------------ the HAL */
/* no IMU fitted: a port with one (an MPU-6050 on I2C, say) fills these */
int hal_read_imu(int16_t quat[4], int16_t gyro_mrad_s[3], int16_t acc_mm_s2[3]) {
  (void)quat; (void)gyro_mrad_s; (void)acc_mm_s2;
  return 0;
}
uint16_t hal_supply_mv(void) { return 48000; }

void hal_command_frame(int32_t *pos, uint8_t n) {
  for (uint8_t j = 0; j < n && j < N; j++) pos[j] = position[j];
}

void hal_read_joints(int32_t *pos, int16_t *vel, int16_t *cur, int8_t *temp, uint8_t *flags, uint8_t n) {
  uint32_t limits = ~GPIO_IDR(GPIOE) & 0x3Fu;
  for (uint8_t j = 0; j < n && j < N; j++) {
    pos[j] = position[j];
    vel[j] = (int16_t)(velocity[j] / 1000);
    cur[j] = (int16_t)(duty[j] / 2);                          /* no current sense: duty as a proxy */
    temp[j] = 0;
    flags[j] = (limits >> j) & 1u ? HIL_J_LIMIT : 0;
  }
}

void hal_write_joints(const int32_t *t, uint8_t n, uint8_t on) {
  for (uint8_t j = 0; j < n && j < N; j++) target[j] = t[j];
  if (on && !enabled)
    for (int j = 0; j < N; j++) integral[j] = 0;
  enabled = on;
  outputs();
}

/* every 1 ms: encoders, the safety inputs, then the PID loop */
static void servo_period(void) {
  struct hil_board *b = stm32_board();
  for (int j = 0; j < N; j++) {
    uint16_t c = (uint16_t)TIM_CNT(ENC[j]);
    counts[j] += (int16_t)(c - last_count[j]);                /* 16-bit wrap handled by the difference */
    last_count[j] = c;
    position[j] = (int32_t)((int64_t)counts[j] * 1000000000 / COUNTS_PER_RAD_X1000[j] / 1000);
    velocity[j] = (position[j] - last_position[j]) * 1000;    /* µrad/s */
    last_position[j] = position[j];
  }
  uint32_t in = GPIO_IDR(GPIOE);
  if (in & (1u << 7)) hil_board_estop(b);                     /* the chain opened */
  if (!(in & (1u << 8))) hil_board_fault(b, HIL_F_AMP_FAULT);
  uint32_t limits = ~in & 0x3Fu;
  for (int j = 0; j < N; j++) {
    int32_t err = target[j] - position[j];
    integral[j] += err;
    if (integral[j] > 50000000) integral[j] = 50000000;
    if (integral[j] < -50000000) integral[j] = -50000000;
    int64_t u = ((int64_t)KP[j] * err + (int64_t)KI[j] * integral[j] / 1000 - (int64_t)KD[j] * velocity[j] / 1000) >> 16;
    if (u > DUTY_MAX) u = DUTY_MAX;
    if (u < -DUTY_MAX) u = -DUTY_MAX;
    if ((limits >> j) & 1u) {                                  /* a limit switch: never drive on into it */
      u = 0;
      if (enabled) hil_board_fault(b, HIL_F_ENCODER);
    }
    duty[j] = (int32_t)u;
  }
  outputs();
}

int main(void) {
  stm32_clock_init(HSE_MHZ);
  stm32_host_link_init();
  pins_init();
  struct hil_board *b = stm32_board();
  hil_board_init(b, HIL_KIND_PUMA6, N, 0);
  b->supply_mv = 48000;
  b->faults |= HIL_F_NOT_HOMED;   /* incremental encoders: HOME (the arm in its home pose) first */
  static const int32_t lo[N] = {-2775000, -3927000, -907000, -1902000, -1745000, -4643000};
  static const int32_t hi[N] = {2775000, 785000, 3927000, 2967000, 1745000, 4643000};
  for (int j = 0; j < N; j++) {
    b->joint[j].pos_min_urad = lo[j];
    b->joint[j].pos_max_urad = hi[j];
    b->joint[j].vel_max_mrad_s = 1300;
    b->joint[j].max_step_urad = 50000;
  }
  hil_board_load_params(b);   /* the limits and timeouts saved with PARAM_SAVE, if any */
  stm32_watchdog_init();
  stm32_run(servo_period);
}
