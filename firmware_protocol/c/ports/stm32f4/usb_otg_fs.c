/* The host link over USB: the STM32F4's OTG_FS core as a CDC-ACM device (PA11 D−, PA12 D+),
 * written against RM0090 ch. 34 / RM0368 ch. 22 (device mode, slave FIFO mode, no DMA). The
 * descriptors and control requests are usb/cdc_acm.c's; this file moves packets.
 *
 * Data: bytes the host sends land in a receive ring; the OUT endpoint is re-armed only while the
 * ring has room for a whole packet, so a flood is held back by NAKs instead of being dropped. Bytes
 * to the host wait in a transmit ring and go out one 64-byte packet at a time; a transfer that
 * ends on a full packet is closed with a zero-length one, so that the host's read returns at once.
 * Compiled here; not run on hardware. */
#include <string.h>

#include "../../usb/cdc_acm.h"
#include "stm32f4.h"
#include "usb_otg_fs.h"

#define OTG 0x50000000u
#define GAHBCFG REG(OTG + 0x008)
#define GUSBCFG REG(OTG + 0x00C)
#define GRSTCTL REG(OTG + 0x010)
#define GINTSTS REG(OTG + 0x014)
#define GINTMSK REG(OTG + 0x018)
#define GRXSTSP REG(OTG + 0x020)
#define GRXFSIZ REG(OTG + 0x024)
#define DIEPTXF0 REG(OTG + 0x028)
#define GCCFG REG(OTG + 0x038)
#define DIEPTXF(n) REG(OTG + 0x104 + 4u * ((n) - 1u))
#define DCFG REG(OTG + 0x800)
#define DCTL REG(OTG + 0x804)
#define DIEPMSK REG(OTG + 0x810)
#define DOEPMSK REG(OTG + 0x814)
#define DAINT REG(OTG + 0x818)
#define DAINTMSK REG(OTG + 0x81C)
#define DIEPCTL(n) REG(OTG + 0x900 + 0x20u * (n))
#define DIEPINT(n) REG(OTG + 0x908 + 0x20u * (n))
#define DIEPTSIZ(n) REG(OTG + 0x910 + 0x20u * (n))
#define DOEPCTL(n) REG(OTG + 0xB00 + 0x20u * (n))
#define DOEPINT(n) REG(OTG + 0xB08 + 0x20u * (n))
#define DOEPTSIZ(n) REG(OTG + 0xB10 + 0x20u * (n))
#define PCGCCTL REG(OTG + 0xE00)
#define FIFO(n) REG(OTG + 0x1000u * ((n) + 1u))

/* GINTSTS / GINTMSK */
#define RXFLVL (1u << 4)
#define USBRST (1u << 12)
#define ENUMDNE (1u << 13)
#define IEPINT (1u << 18)
#define OEPINT (1u << 19)
/* endpoint control and interrupts */
#define EPENA (1u << 31)
#define SD0PID (1u << 28)
#define SNAK (1u << 27)
#define CNAK (1u << 26)
#define STALL (1u << 21)
#define USBAEP (1u << 15)
#define XFRC (1u << 0)
#define STUP (1u << 3)
#define PKTCNT1 (1u << 19)
#define STUPCNT3 (3u << 29)
/* GRXSTSP packet status */
#define PKT_OUT_DATA 2u
#define PKT_OUT_DONE 3u
#define PKT_SETUP_DONE 4u
#define PKT_SETUP_DATA 6u

#define OTG_FS_IRQ 67u

/* FIFO RAM: 320 words. Receive 128 words (two data packets, the SETUPs and their status words),
 * endpoint 0 IN 64 (a 67-byte configuration descriptor in one go), data IN 64, notify IN 16. */
#define RX_FIFO_WORDS 128u
#define TX0_WORDS 64u
#define TX1_WORDS 64u
#define TX2_WORDS 16u

#define RX_RING 1024u   /* power of two; ≥ 2 packets, and a burst of commands while the main loop is busy */
#define TX_RING 1024u   /* five STATEs of 17 joints */
static volatile uint8_t rx_ring[RX_RING], tx_ring[TX_RING];
static volatile uint32_t rx_head, rx_tail, tx_head, tx_tail;
static volatile uint8_t out_paused, in_busy, last_in_full, configured;

static struct cdc_state cdc;
static uint8_t setup[8];
static uint8_t ep0_out[CDC_EP0_SIZE];
static uint16_t ep0_out_len;

static void fifo_write(unsigned ep, const uint8_t *data, uint32_t len) {
  for (uint32_t i = 0; i < len; i += 4) {
    uint32_t w = 0;
    memcpy(&w, data + i, len - i < 4 ? len - i : 4);
    FIFO(ep) = w;
  }
}

static void fifo_read(uint8_t *dst, uint32_t len, uint32_t room) {
  for (uint32_t i = 0; i < len; i += 4) {
    uint32_t w = FIFO(0);   /* every packet pops from the one receive FIFO */
    if (dst && i < room) memcpy(dst + i, &w, room - i < 4 ? room - i : 4);
  }
}

static void ep0_arm_out(void) {
  DOEPTSIZ(0) = STUPCNT3 | PKTCNT1 | CDC_EP0_SIZE;
  DOEPCTL(0) |= EPENA | CNAK;
}

static void ep0_send(const uint8_t *data, uint32_t len) {
  uint32_t packets = len ? (len + CDC_EP0_SIZE - 1u) / CDC_EP0_SIZE : 1u;
  DIEPTSIZ(0) = (packets << 19) | len;
  DIEPCTL(0) |= EPENA | CNAK;
  fifo_write(0, data, len);
}

static void ep0_stall(void) {
  DIEPCTL(0) |= STALL;
  DOEPCTL(0) |= STALL;   /* the core clears both at the next SETUP */
}

static void data_out_arm(void) {
  DOEPTSIZ(CDC_DATA_OUT_EP) = PKTCNT1 | CDC_DATA_SIZE;
  DOEPCTL(CDC_DATA_OUT_EP) |= EPENA | CNAK;
  out_paused = 0;
}

static void open_data_endpoints(void) {
  DOEPCTL(CDC_DATA_OUT_EP) = USBAEP | (2u << 18) | SD0PID | CDC_DATA_SIZE;
  DIEPCTL(CDC_DATA_IN_EP) = USBAEP | (2u << 18) | (1u << 22) | SD0PID | SNAK | CDC_DATA_SIZE;
  DIEPCTL(CDC_NOTIFY_EP) = USBAEP | (3u << 18) | (2u << 22) | SD0PID | SNAK | CDC_NOTIFY_SIZE;
  DAINTMSK |= (1u << CDC_DATA_IN_EP) | (1u << (16 + CDC_DATA_OUT_EP));
  in_busy = 0;
  configured = 1;
  data_out_arm();
}

static void handle_setup(void) {
  struct cdc_reply r;
  cdc_control(&cdc, setup, &r);
  if (r.event == CDC_EV_SET_ADDRESS) DCFG = (DCFG & ~(0x7Fu << 4)) | ((uint32_t)r.value << 4);
  if (r.event == CDC_EV_CONFIGURED) open_data_endpoints();
  if (r.event == CDC_EV_DECONFIGURED) configured = 0;
  if (r.action == CDC_SEND) ep0_send(r.data, r.len);
  else if (r.action == CDC_STATUS) ep0_send(0, 0);
  else if (r.action == CDC_STALL) ep0_stall();
  /* CDC_RECEIVE: endpoint 0 OUT is armed; the data arrives as PKT_OUT_DATA */
}

static void tx_start(void) {
  if (!configured || in_busy) return;
  uint32_t avail = (tx_head - tx_tail) & (TX_RING - 1u);
  if (avail == 0 && !last_in_full) return;
  uint8_t packet[CDC_DATA_SIZE];
  uint32_t n = avail < CDC_DATA_SIZE ? avail : CDC_DATA_SIZE;
  for (uint32_t i = 0; i < n; i++) packet[i] = tx_ring[(tx_tail + i) & (TX_RING - 1u)];
  tx_tail = (tx_tail + n) & (TX_RING - 1u);
  last_in_full = n == CDC_DATA_SIZE;   /* a full packet is followed by more or by a zero-length one */
  in_busy = 1;
  DIEPTSIZ(CDC_DATA_IN_EP) = PKTCNT1 | n;
  DIEPCTL(CDC_DATA_IN_EP) |= EPENA | CNAK;
  fifo_write(CDC_DATA_IN_EP, packet, n);
}

static void rx_packet(uint32_t status) {
  uint32_t ep = status & 15u, len = (status >> 4) & 0x7FFu, kind = (status >> 17) & 15u;
  if (kind == PKT_SETUP_DATA) {
    fifo_read(setup, len, sizeof setup);
  } else if (kind == PKT_SETUP_DONE) {
    handle_setup();
  } else if (kind == PKT_OUT_DATA && ep == 0) {
    fifo_read(ep0_out, len, sizeof ep0_out);
    ep0_out_len = (uint16_t)(len < sizeof ep0_out ? len : sizeof ep0_out);
    if (cdc.pending_request) {
      if (cdc_control_out(&cdc, ep0_out, ep0_out_len) == CDC_STATUS) ep0_send(0, 0);
      else ep0_stall();
    }
  } else if (kind == PKT_OUT_DATA && ep == CDC_DATA_OUT_EP) {
    uint8_t packet[CDC_DATA_SIZE];
    fifo_read(packet, len, sizeof packet);
    for (uint32_t i = 0; i < len && i < sizeof packet; i++) {
      rx_ring[rx_head] = packet[i];   /* room for it was checked before the endpoint was armed */
      rx_head = (rx_head + 1u) & (RX_RING - 1u);
    }
  } else if (kind == PKT_OUT_DONE && ep == CDC_DATA_OUT_EP) {
    if (RX_RING - 1u - ((rx_head - rx_tail) & (RX_RING - 1u)) >= CDC_DATA_SIZE) data_out_arm();
    else out_paused = 1;               /* NAK until usb_read() makes room */
  } else if (len) {
    fifo_read(0, len, 0);
  }
}

static void bus_reset(void) {
  DCFG &= ~(0x7Fu << 4);
  configured = 0;
  in_busy = 0;
  last_in_full = 0;
  for (unsigned ep = 0; ep < 4; ep++) {
    DOEPCTL(ep) = SNAK;
    DIEPINT(ep) = 0xFFu;
    DOEPINT(ep) = 0xFFu;
  }
  DAINTMSK = 1u | (1u << 16);
  DOEPMSK = XFRC | STUP;
  DIEPMSK = XFRC;
  GRXFSIZ = RX_FIFO_WORDS;
  DIEPTXF0 = (TX0_WORDS << 16) | RX_FIFO_WORDS;
  DIEPTXF(1) = (TX1_WORDS << 16) | (RX_FIFO_WORDS + TX0_WORDS);
  DIEPTXF(2) = (TX2_WORDS << 16) | (RX_FIFO_WORDS + TX0_WORDS + TX1_WORDS);
  GRSTCTL = (0x10u << 6) | (1u << 5);   /* flush every TX FIFO */
  while (GRSTCTL & (1u << 5)) {
  }
  GRSTCTL = 1u << 4;                    /* and the RX FIFO */
  while (GRSTCTL & (1u << 4)) {
  }
  ep0_arm_out();
}

void OTG_FS_IRQHandler(void) {
  uint32_t st = GINTSTS & GINTMSK;
  if (st & USBRST) {
    GINTSTS = USBRST;
    bus_reset();
  }
  if (st & ENUMDNE) {
    GINTSTS = ENUMDNE;
    DIEPCTL(0) &= ~3u;                  /* endpoint 0: 64-byte packets */
    DCTL |= 1u << 8;                    /* CGINAK */
  }
  while (GINTSTS & RXFLVL) rx_packet(GRXSTSP);
  if (st & IEPINT) {
    uint32_t eps = DAINT & 0xFFFFu;
    if (eps & 1u) DIEPINT(0) = DIEPINT(0);
    if (eps & (1u << CDC_DATA_IN_EP)) {
      uint32_t f = DIEPINT(CDC_DATA_IN_EP);
      DIEPINT(CDC_DATA_IN_EP) = f;
      if (f & XFRC) {
        in_busy = 0;
        tx_start();
      }
    }
  }
  if (st & OEPINT) {
    uint32_t eps = DAINT >> 16;
    if (eps & 1u) {
      uint32_t f = DOEPINT(0);
      DOEPINT(0) = f;
      if (f & (XFRC | STUP)) ep0_arm_out();   /* ready for the status stage and the next SETUP */
    }
    if (eps & (1u << CDC_DATA_OUT_EP)) DOEPINT(CDC_DATA_OUT_EP) = DOEPINT(CDC_DATA_OUT_EP);
  }
}

static void irq_off(void) { NVIC_ICER(OTG_FS_IRQ / 32u) = 1u << (OTG_FS_IRQ % 32u); }
static void irq_on(void) { NVIC_ISER(OTG_FS_IRQ / 32u) = 1u << (OTG_FS_IRQ % 32u); }

void usb_init(const uint8_t uid[12]) {
  cdc_init(&cdc, uid);
  RCC_AHB2ENR |= 1u << 7;                          /* OTG_FS clock (48 MHz from the PLL's Q) */
  stm32_gpio_af(GPIOA, 11, 10);
  stm32_gpio_af(GPIOA, 12, 10);
  GPIO_OSPEEDR(GPIOA) |= (3u << 22) | (3u << 24);
  while (!(GRSTCTL & (1u << 31))) {                /* AHB idle */
  }
  GRSTCTL |= 1u;                                   /* core soft reset */
  while (GRSTCTL & 1u) {
  }
  GUSBCFG = (1u << 30) | (6u << 10) | (1u << 6);   /* device mode, turnaround for HCLK ≥ 32 MHz, FS PHY */
  for (volatile uint32_t i = 0; i < CPU_HZ / 100u; i++) {   /* ≥ 25 ms for the mode to take */
  }
  GCCFG = (1u << 16) | (1u << 21);                 /* PHY on; no VBUS sensing (PA9 is not wired) */
  PCGCCTL = 0;
  DCFG = 3u;                                       /* full speed, internal PHY */
  GINTSTS = 0xFFFFFFFFu;
  GINTMSK = USBRST | ENUMDNE | RXFLVL | IEPINT | OEPINT;
  GAHBCFG = 1u;                                    /* global interrupt on */
  DCTL &= ~(1u << 1);                              /* connect: the pull-up on D+ */
  irq_on();
}

size_t usb_read(uint8_t *buf, size_t max) {
  size_t n = 0;
  while (rx_tail != rx_head && n < max) {
    buf[n++] = rx_ring[rx_tail];
    rx_tail = (rx_tail + 1u) & (RX_RING - 1u);
  }
  if (out_paused && RX_RING - 1u - ((rx_head - rx_tail) & (RX_RING - 1u)) >= CDC_DATA_SIZE) {
    irq_off();
    if (out_paused) data_out_arm();
    irq_on();
  }
  return n;
}

size_t usb_write(const uint8_t *data, size_t len) {
  uint32_t used = (tx_head - tx_tail) & (TX_RING - 1u);
  if (!configured || len >= TX_RING - used) return 0;   /* all or nothing: a frame is never sent in part */
  for (size_t i = 0; i < len; i++) {
    tx_ring[tx_head] = data[i];
    tx_head = (tx_head + 1u) & (TX_RING - 1u);
  }
  irq_off();
  tx_start();
  irq_on();
  return len;
}
