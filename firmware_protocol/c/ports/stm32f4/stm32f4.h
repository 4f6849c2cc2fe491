/* The few STM32F4 registers the ports use, from RM0090 (F405/407) and RM0368 (F401); no vendor
 * SDK. Addresses are the same on both families for everything here. */
#ifndef HIL_STM32F4_H
#define HIL_STM32F4_H

#include <stdint.h>

#define REG(addr) (*(volatile uint32_t *)(addr))

#define RCC 0x40023800u
#define RCC_CR REG(RCC + 0x00)
#define RCC_PLLCFGR REG(RCC + 0x04)
#define RCC_CFGR REG(RCC + 0x08)
#define RCC_AHB1ENR REG(RCC + 0x30)
#define RCC_AHB2ENR REG(RCC + 0x34)
#define RCC_APB1ENR REG(RCC + 0x40)
#define RCC_APB2ENR REG(RCC + 0x44)

#define FLASH_R 0x40023C00u
#define FLASH_ACR REG(FLASH_R + 0x00)
#define FLASH_KEYR REG(FLASH_R + 0x04)
#define FLASH_SR REG(FLASH_R + 0x0C)
#define FLASH_CR REG(FLASH_R + 0x10)

#define GPIOA 0x40020000u
#define GPIOB 0x40020400u
#define GPIOC 0x40020800u
#define GPIOD 0x40020C00u
#define GPIOE 0x40021000u
#define GPIO_MODER(p) REG((p) + 0x00)
#define GPIO_OSPEEDR(p) REG((p) + 0x08)
#define GPIO_PUPDR(p) REG((p) + 0x0C)
#define GPIO_IDR(p) REG((p) + 0x10)
#define GPIO_BSRR(p) REG((p) + 0x18)
#define GPIO_AFRL(p) REG((p) + 0x20)
#define GPIO_AFRH(p) REG((p) + 0x24)

#define USART2 0x40004400u
#define USART_SR(u) REG((u) + 0x00)
#define USART_DR(u) REG((u) + 0x04)
#define USART_BRR(u) REG((u) + 0x08)
#define USART_CR1(u) REG((u) + 0x0C)

#define I2C1 0x40005400u
#define I2C_CR1(i) REG((i) + 0x00)
#define I2C_CR2(i) REG((i) + 0x04)
#define I2C_DR(i) REG((i) + 0x10)
#define I2C_SR1(i) REG((i) + 0x14)
#define I2C_SR2(i) REG((i) + 0x18)
#define I2C_CCR(i) REG((i) + 0x1C)
#define I2C_TRISE(i) REG((i) + 0x20)

#define ADC1 0x40012000u
#define ADC_SR REG(ADC1 + 0x00)
#define ADC_CR2 REG(ADC1 + 0x08)
#define ADC_SMPR2 REG(ADC1 + 0x10)
#define ADC_SQR3 REG(ADC1 + 0x34)
#define ADC_DR REG(ADC1 + 0x4C)

/* timers: CR1 0x00, SMCR 0x08, DIER 0x0C, CCMR1 0x18, CCMR2 0x1C, CCER 0x20, CNT 0x24, PSC 0x28,
 * ARR 0x2C, CCR1..4 0x34..0x40, BDTR 0x44 */
#define TIM1 0x40010000u
#define TIM2 0x40000000u
#define TIM3 0x40000400u
#define TIM4 0x40000800u
#define TIM5 0x40000C00u
#define TIM8 0x40010400u
#define TIM9 0x40014000u
#define TIM12 0x40001800u
#define TIM_CR1(t) REG((t) + 0x00)
#define TIM_SMCR(t) REG((t) + 0x08)
#define TIM_CCMR1(t) REG((t) + 0x18)
#define TIM_CCMR2(t) REG((t) + 0x1C)
#define TIM_CCER(t) REG((t) + 0x20)
#define TIM_CNT(t) REG((t) + 0x24)
#define TIM_PSC(t) REG((t) + 0x28)
#define TIM_ARR(t) REG((t) + 0x2C)
#define TIM_CCR(t, ch) REG((t) + 0x34 + 4 * ((ch) - 1))
#define TIM_BDTR(t) REG((t) + 0x44)

#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define SCB_ICSR REG(0xE000ED04u)
#define ICSR_PENDSTSET (1u << 26)
#define NVIC_ISER(n) REG(0xE000E100u + 4 * (n))
#define NVIC_ICER(n) REG(0xE000E180u + 4 * (n))
#define SCB_AIRCR REG(0xE000ED0Cu)
#define UID_BASE 0x1FFF7A10u
#define IWDG_KR REG(0x40003000u)
#define IWDG_PR REG(0x40003004u)
#define IWDG_RLR REG(0x40003008u)

#ifdef HIL_QEMU
/* QEMU's STM32F405 (netduinoplus2) runs its core and SysTick at 168 MHz whatever RCC is told */
#define CPU_HZ 168000000u
#else
#define CPU_HZ 84000000u   /* PLL: 1 MHz × N 336 / P 4 (HSE or HSI / M); 48 MHz for USB at Q 7; APB1 42 MHz */
#endif

/* common.c: what both ports share */
/* hse_mhz: the board's crystal (25 on the Black Pill, 8 on the F407 Discovery), needed for USB's
 * 48 MHz (±0.25 %); 0: the internal 16 MHz oscillator (UART link only) */
void stm32_clock_init(uint32_t hse_mhz);
/* the host link: USB CDC (HIL_HOST_LINK_USB, the default) or USART2 through a USB-UART bridge */
void stm32_host_link_init(void);
void stm32_uart_init(uint32_t baud);
void stm32_gpio_af(uint32_t port, unsigned pin, unsigned af);
void stm32_gpio_mode(uint32_t port, unsigned pin, unsigned mode, unsigned pull);
void stm32_watchdog_init(void);
void stm32_watchdog_feed(void);
/* the main loop both ports run: UART bytes into the core, the 1 kHz tick, the MCU watchdog */
void stm32_run(void (*servo_period)(void));
extern volatile uint32_t stm32_ms;
struct hil_board *stm32_board(void);

#endif
