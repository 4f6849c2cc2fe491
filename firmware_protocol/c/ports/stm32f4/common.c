/* What both STM32F4 ports share: start-up, clocks, the host link (USB CDC, usb_otg_fs.c, or
 * USART2 through a USB-UART bridge with interrupt-driven rings: `make arm HOST_LINK=uart`), the
 * microsecond clock, the unique id, parameter storage in a flash sector, the MCU watchdog, reset,
 * and the main loop. Compiled with arm-none-eabi-gcc; not yet run on hardware. */
#include <stddef.h>
#include <string.h>

#include "../../hal.h"
#include "../../hil_fw.h"
#include "stm32f4.h"
#include "usb_otg_fs.h"

#ifndef HIL_HOST_LINK_USB
#define HIL_HOST_LINK_USB 1
#endif

/* ------------------------------------------------------------------ start-up */
extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
int main(void);
void Reset_Handler(void);
void Default_Handler(void);
void SysTick_Handler(void);
void USART2_IRQHandler(void);

void Reset_Handler(void) {
  uint32_t *src = &_sidata, *dst = &_sdata;
  while (dst < &_edata) *dst++ = *src++;
  for (dst = &_sbss; dst < &_ebss; dst++) *dst = 0;
  main();
  for (;;) {
  }
}

void Default_Handler(void) {
  for (;;) {  /* an unexpected fault: the MCU watchdog resets us, and the host sees a new boot id */
  }
}

/* Cortex-M4 vectors (16 system + IRQs up to OTG_FS = 67; USART2 is 38) */
__attribute__((section(".isr_vector"), used)) static void (*const vectors[16 + 68])(void) = {
  (void (*)(void))(&_estack), Reset_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
  Default_Handler, 0, 0, 0, 0, Default_Handler, Default_Handler, 0, Default_Handler, SysTick_Handler,
#if HIL_HOST_LINK_USB
  [16 + 67] = OTG_FS_IRQHandler,
#else
  [16 + 38] = USART2_IRQHandler,
#endif
};

/* ------------------------------------------------------------------ clocks and pins */
/* Wait for a clock's ready bit. QEMU does not model RCC (it reads 0): there the wait gives up
 * after a while and the clocks are what QEMU makes them (168 MHz), as on a real part they are
 * what the bits say once set. */
static void clock_wait(volatile uint32_t *reg, uint32_t mask, uint32_t want) {
#ifdef HIL_QEMU
  for (uint32_t tries = 0; tries < 1000u && (*reg & mask) != want; tries++) {
  }
#else
  while ((*reg & mask) != want) {
  }
#endif
}

void stm32_clock_init(uint32_t hse_mhz) {
  uint32_t source = 0u, m = 16u;
  if (hse_mhz) {
    RCC_CR |= 1u << 16;                           /* HSE on */
    clock_wait(&RCC_CR, 1u << 17, 1u << 17);
    source = 1u << 22;
    m = hse_mhz;
  } else {
    RCC_CR |= 1u;                                 /* HSI on (it is after reset) */
    clock_wait(&RCC_CR, 1u << 1, 1u << 1);
  }
  /* PLL: 1 MHz after M, VCO 336 MHz (inside the F401's 192–432), P 4: 84 MHz, Q 7: 48 MHz */
  RCC_PLLCFGR = m | (336u << 6) | (1u << 16) | source | (7u << 24);
  RCC_CR |= 1u << 24;
  clock_wait(&RCC_CR, 1u << 25, 1u << 25);
  FLASH_ACR = 2u | (1u << 8) | (1u << 9) | (1u << 10);   /* 2 wait states, prefetch, caches */
  RCC_CFGR = (4u << 10) | 2u;                     /* APB1 = HCLK / 2, SYSCLK = PLL */
  clock_wait(&RCC_CFGR, 3u << 2, 2u << 2);
  RCC_AHB1ENR |= 0x1Fu;                           /* GPIOA..E */
}

void stm32_gpio_mode(uint32_t port, unsigned pin, unsigned mode, unsigned pull) {
  GPIO_MODER(port) = (GPIO_MODER(port) & ~(3u << (2 * pin))) | (mode << (2 * pin));
  GPIO_PUPDR(port) = (GPIO_PUPDR(port) & ~(3u << (2 * pin))) | (pull << (2 * pin));
}

void stm32_gpio_af(uint32_t port, unsigned pin, unsigned af) {
  stm32_gpio_mode(port, pin, 2u, 0u);
  if (pin < 8) GPIO_AFRL(port) = (GPIO_AFRL(port) & ~(15u << (4 * pin))) | (af << (4 * pin));
  else GPIO_AFRH(port) = (GPIO_AFRH(port) & ~(15u << (4 * (pin - 8)))) | (af << (4 * (pin - 8)));
}

/* ------------------------------------------------------------------ the host UART (USART2, PA2/PA3) */
#define RX_RING 512u   /* a 1 Mbaud burst of 5 ms between main-loop passes */
#define TX_RING 1024u  /* five STATEs of 17 joints */
static volatile uint8_t rx_ring[RX_RING], tx_ring[TX_RING];
static volatile uint32_t rx_head, rx_tail, tx_head, tx_tail, rx_overruns;

void stm32_uart_init(uint32_t baud) {
  RCC_APB1ENR |= 1u << 17;
  stm32_gpio_af(GPIOA, 2, 7);
  stm32_gpio_af(GPIOA, 3, 7);
  /* APB1 42 MHz, oversampling by 8 for ≥ 1 Mbaud: BRR = 2·f/baud with the fraction's bit 3 cleared */
  uint32_t div = (2u * (CPU_HZ / 2u) + baud / 2u) / baud;
  USART_BRR(USART2) = (div & ~0xFu) | ((div & 0xFu) >> 1);
  USART_CR1(USART2) = (1u << 15) | (1u << 13) | (1u << 5) | (1u << 3) | (1u << 2);   /* OVER8 UE RXNEIE TE RE */
  NVIC_ISER(1) = 1u << (38 - 32);
}

void USART2_IRQHandler(void) {
  uint32_t sr = USART_SR(USART2);
  if (sr & ((1u << 5) | (1u << 3))) {             /* RXNE (or ORE: reading DR clears it) */
    uint8_t c = (uint8_t)USART_DR(USART2);
    uint32_t next = (rx_head + 1u) % RX_RING;
    if (next != rx_tail) {
      rx_ring[rx_head] = c;
      rx_head = next;
    } else {
      rx_overruns++;
    }
  }
  if ((sr & (1u << 7)) && (USART_CR1(USART2) & (1u << 7))) {   /* TXE, interrupt on */
    if (tx_tail != tx_head) {
      USART_DR(USART2) = tx_ring[tx_tail];
      tx_tail = (tx_tail + 1u) % TX_RING;
    } else {
      USART_CR1(USART2) &= ~(1u << 7);
    }
  }
}

void stm32_host_link_init(void) {
#if HIL_HOST_LINK_USB
  uint8_t uid[12];
  hal_unique_id(uid);
  usb_init(uid);
#else
  stm32_uart_init(1000000u);
#endif
}

static size_t host_read(uint8_t *chunk, size_t max) {
#if HIL_HOST_LINK_USB
  return usb_read(chunk, max);
#else
  size_t n = 0;
  while (rx_tail != rx_head && n < max) {
    chunk[n++] = rx_ring[rx_tail];
    rx_tail = (rx_tail + 1u) % RX_RING;
  }
  return n;
#endif
}

size_t hal_uart_write(const uint8_t *data, size_t len) {
#if HIL_HOST_LINK_USB
  return usb_write(data, len);
#elif defined(HIL_QEMU)
  /* QEMU's USART raises no transmit interrupt (TXE and TC read set): transmit by polling */
  for (size_t i = 0; i < len; i++) {
    while (!(USART_SR(USART2) & (1u << 7))) {
    }
    USART_DR(USART2) = data[i];
  }
  return len;
#else
  uint32_t used = (tx_head + TX_RING - tx_tail) % TX_RING;
  if (len >= TX_RING - used) return 0;           /* all or nothing: a frame is never sent in part */
  for (size_t i = 0; i < len; i++) {
    tx_ring[tx_head] = data[i];
    tx_head = (tx_head + 1u) % TX_RING;
  }
  USART_CR1(USART2) |= 1u << 7;                   /* TXEIE */
  return len;
#endif
}

/* ------------------------------------------------------------------ time, id, storage, reset */
volatile uint32_t stm32_ms;
void SysTick_Handler(void) { stm32_ms++; }

uint64_t hal_micros(void) {
  static uint64_t last;
  uint32_t ms, cvr, pending;
  do {
    ms = stm32_ms;
    cvr = SYST_CVR;
    pending = SCB_ICSR & ICSR_PENDSTSET;
  } while (ms != stm32_ms);
  uint64_t t = (uint64_t)ms * 1000u + (uint64_t)((SYST_RVR - cvr) / (CPU_HZ / 1000000u));
  /* the counter wrapped but its interrupt is not taken yet (QEMU takes interrupts only between the
   * blocks it translates; real hardware inside a masked section): the millisecond is already over */
  if (pending && cvr > SYST_RVR / 2u) t += 1000u;
  if (t < last) t = last;   /* never backwards: every age the board computes is a difference */
  last = t;
  return t;
}

#ifndef HIL_QEMU   /* QEMU has no unique id, no flash interface: its port provides these four */
void hal_unique_id(uint8_t uid[12]) { memcpy(uid, (const void *)UID_BASE, 12); }

uint32_t hal_random32(void) {
  /* the boot id needs only to differ from the last boot's: the unique id mixed with the clock */
  uint32_t x = REG(UID_BASE) ^ REG(UID_BASE + 4) ^ (SYST_CVR << 16) ^ stm32_ms;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return x;
}

/* parameters in flash sector 3 (16 KB at 0x0800C000): a length, a CRC-32, the record */
#define STORE_ADDR 0x0800C000u
int hal_storage_read(void *data, size_t len) {
  const uint32_t *hdr = (const uint32_t *)STORE_ADDR;
  if (hdr[0] != len || hdr[1] != hil_crc32((const uint8_t *)(hdr + 2), len)) return -1;
  memcpy(data, hdr + 2, len);
  return 0;
}

static void flash_wait(void) {
  while (FLASH_SR & (1u << 16)) {
  }
}

int hal_storage_write(const void *data, size_t len) {
  if (len > 16384 - 8) return -1;
  FLASH_KEYR = 0x45670123u;
  FLASH_KEYR = 0xCDEF89ABu;
  flash_wait();
  FLASH_CR = (2u << 8) | (3u << 3) | (1u << 1);   /* 32-bit, sector 3, SER */
  FLASH_CR |= 1u << 16;                           /* STRT */
  flash_wait();
  FLASH_CR = (2u << 8) | 1u;                      /* PG */
  uint32_t words[2] = {(uint32_t)len, hil_crc32((const uint8_t *)data, len)};
  volatile uint32_t *dst = (volatile uint32_t *)STORE_ADDR;
  for (int i = 0; i < 2; i++) { dst[i] = words[i]; flash_wait(); }
  for (size_t i = 0; i < (len + 3) / 4; i++) {
    uint32_t w = 0xFFFFFFFFu;
    memcpy(&w, (const uint8_t *)data + 4 * i, (len - 4 * i) < 4 ? (len - 4 * i) : 4);
    dst[2 + i] = w;
    flash_wait();
  }
  FLASH_CR = 1u << 31;                            /* lock */
  return 0;
}
#endif

void hal_reset(void) { SCB_AIRCR = (0x5FAu << 16) | (1u << 2); }

/* the MCU watchdog: a firmware that stops running the main loop for 50 ms is reset */
void stm32_watchdog_init(void) {
  IWDG_KR = 0x5555u;
  IWDG_PR = 0;        /* LSI 32 kHz / 4 */
  IWDG_RLR = 400u;    /* 50 ms */
  IWDG_KR = 0xCCCCu;
}

void stm32_watchdog_feed(void) { IWDG_KR = 0xAAAAu; }

/* ------------------------------------------------------------------ the main loop */
static struct hil_board board;

void stm32_run(void (*servo_period)(void)) {
  SYST_RVR = CPU_HZ / 1000u - 1u;
  SYST_CVR = 0;
  SYST_CSR = 7u;                                  /* core clock, interrupt, on */
  uint32_t last_ms = stm32_ms;
  for (;;) {
    uint8_t chunk[64];
    size_t n = host_read(chunk, sizeof chunk);
    if (n) hil_board_rx(&board, chunk, n, hal_micros());
    if (rx_overruns) {
      board.faults |= HIL_F_RX_OVERRUN;
      rx_overruns = 0;
    }
    if (stm32_ms != last_ms) {                      /* 1 kHz: the servos, then the board's watchdog */
      last_ms = stm32_ms;
      servo_period();
      hil_board_tick(&board, hal_micros());
      stm32_watchdog_feed();
    }
#ifdef HIL_QEMU
    /* sleep until the next interrupt (the 1 ms tick, a received byte): QEMU then leaves the host's
     * CPU to others instead of spinning this loop */
    if (rx_tail == rx_head) __asm__ volatile("wfi");
#endif
  }
}

struct hil_board *stm32_board(void) { return &board; }
