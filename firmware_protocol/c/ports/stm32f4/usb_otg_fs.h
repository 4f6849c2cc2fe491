/* The host link over USB CDC-ACM on the STM32F4's OTG_FS core (usb_otg_fs.c). */
#ifndef HIL_USB_OTG_FS_H
#define HIL_USB_OTG_FS_H

#include <stddef.h>
#include <stdint.h>

/* Start the device (the PLL's 48 MHz output must be running: stm32_clock_init with an HSE). */
void usb_init(const uint8_t uid[12]);
/* Bytes the host sent, up to `max`; never waits. */
size_t usb_read(uint8_t *buf, size_t max);
/* Queue `len` bytes for the host: all or nothing (0 while the ring is full or the host has not
 * configured the device). */
size_t usb_write(const uint8_t *data, size_t len);
void OTG_FS_IRQHandler(void);

#endif
