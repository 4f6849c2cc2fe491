/* The host tools (host/decode_main.c, host/bench_main.c) as Cortex-M4 programs on QEMU's STM32F405,
 * their stdin and stdout files on the host through ARM semihosting (`qemu-system-arm -semihosting`):
 * stdin is `hil-in.bin`, stdout `hil-out.txt`, in QEMU's working folder. The core is the one every
 * port runs, compiled for the M4; this file gives newlib's stdio its system calls and the processor
 * its start-up, and a clock: SysTick at 168 MHz of QEMU's virtual time (under `-icount shift=0`
 * one instruction per nanosecond, so the clock counts instructions). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../stm32f4/stm32f4.h"

/* ------------------------------------------------------------------ semihosting */
enum { SYS_OPEN = 0x01, SYS_CLOSE = 0x02, SYS_WRITE = 0x05, SYS_READ = 0x06, SYS_EXIT = 0x18 };

static int semihost(int op, void *arg) {
  register int r0 __asm__("r0") = op;
  register void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static int host_open(const char *name, size_t len, int mode) {
  uintptr_t block[3] = {(uintptr_t)name, (uintptr_t)mode, (uintptr_t)len};
  return semihost(SYS_OPEN, block);
}

static int files[2] = {-1, -1};   /* stdin, stdout on the host */

/* On 32-bit ARM the exit call carries a reason, not a code: QEMU exits 0 for "application exit"
 * and 1 for anything else */
__attribute__((noreturn)) void _exit(int code) {
  for (;;) semihost(SYS_EXIT, (void *)(uintptr_t)(code == 0 ? 0x20026u : 0x20024u));
}

int _read(int fd, char *buf, int len) {
  if (fd != 0 || files[0] < 0) return -1;
  uintptr_t block[3] = {(uintptr_t)files[0], (uintptr_t)buf, (uintptr_t)len};
  return len - semihost(SYS_READ, block);    /* it answers how many were NOT read */
}

int _write(int fd, const char *buf, int len) {
  if ((fd != 1 && fd != 2) || files[1] < 0) return -1;
  uintptr_t block[3] = {(uintptr_t)files[1], (uintptr_t)buf, (uintptr_t)len};
  return len - semihost(SYS_WRITE, block);
}

int _close(int fd) { (void)fd; return 0; }
int _fstat(int fd, struct stat *st) { (void)fd; st->st_mode = S_IFCHR; return 0; }
int _isatty(int fd) { (void)fd; return 0; }
int _lseek(int fd, int offset, int whence) { (void)fd; (void)offset; (void)whence; return 0; }
int _getpid(void) { return 1; }
int _kill(int pid, int sig) { (void)pid; (void)sig; errno = EINVAL; return -1; }

extern char _ebss, _estack;
void *_sbrk(ptrdiff_t incr) {
  static uintptr_t brk;
  if (!brk) brk = (uintptr_t)&_ebss;
  if (brk + (uintptr_t)incr > (uintptr_t)&_estack - 8192u) {   /* 8 KB left for the stack */
    errno = ENOMEM;
    return (void *)-1;
  }
  uintptr_t old = brk;
  brk += (uintptr_t)incr;
  return (void *)old;
}

/* ------------------------------------------------------------------ the clock */
static volatile uint32_t ms;
void SysTick_Handler(void) { ms++; }

uint64_t qemu_now_ns(void) {
  uint32_t m, cvr;
  do {
    m = ms;
    cvr = SYST_CVR;
  } while (m != ms);
  return (uint64_t)m * 1000000u + (uint64_t)(SYST_RVR - cvr) * 1000u / (CPU_HZ / 1000000u);
}

/* ------------------------------------------------------------------ start-up */
extern uint32_t _sidata, _sdata, _edata, _sbss;
int main(int argc, char **argv);
void Reset_Handler(void);
void Default_Handler(void);

void Default_Handler(void) { _exit(3); }

void Reset_Handler(void) {
  uint32_t *src = &_sidata, *dst = &_sdata;
  while (dst < &_edata) *dst++ = *src++;
  for (dst = &_sbss; dst < (uint32_t *)&_ebss; dst++) *dst = 0;
  files[0] = host_open("hil-in.bin", 10, 1);    /* "rb" */
  files[1] = host_open("hil-out.txt", 11, 5);   /* "wb" */
  SYST_RVR = CPU_HZ / 1000u - 1u;
  SYST_CVR = 0;
  SYST_CSR = 7u;
  static char *argv[] = {"hil", 0};
  _exit(main(1, argv));
}

__attribute__((section(".isr_vector"), used)) static void (*const vectors[16])(void) = {
  (void (*)(void))(&_estack), Reset_Handler, Default_Handler, Default_Handler, Default_Handler, Default_Handler,
  Default_Handler, 0, 0, 0, 0, Default_Handler, Default_Handler, 0, Default_Handler, SysTick_Handler,
};
