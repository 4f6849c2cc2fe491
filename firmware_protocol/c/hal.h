/* The hardware the firmware core needs, and nothing else. Each port (host/, ports/…) implements
 * these; the core calls them from hil_board_rx() and hil_board_tick(), never from an interrupt. */
#ifndef HIL_HAL_H
#define HIL_HAL_H

#include <stdint.h>
#include <stddef.h>

/* Queue bytes for the UART / USB CDC. Returns how many were taken: a full queue drops a STATE
 * (the next one supersedes it), never a reply to a transaction (the core sends those first). */
size_t hal_uart_write(const uint8_t *data, size_t len);
/* Microseconds since boot, never smaller than the last value returned: a port whose tick counter
 * can wrap before its interrupt is taken (SysTick on a Cortex-M, with interrupts masked or under
 * QEMU) must see the pending tick (ports/stm32f4/common.c). The core tolerates a read a little
 * early anyway (its ages are 0, never negative). */
uint64_t hal_micros(void);
/* The joints' positions in µrad (board frame: the port applies the servo's own zero and
 * direction), velocities in mrad/s, currents in mA, temperature in °C, and per joint the flags
 * the hardware knows (STALE, OVERTEMP, OVERLOAD, ENCODER, VOLTAGE). Open-loop servos report the
 * commanded, rate-limited pulse (and the port sets HIL_CAP_POSITION_ESTIMATED). */
void hal_read_joints(int32_t *pos_urad, int16_t *vel_mrad_s, int16_t *current_ma, int8_t *temp_c,
                     uint8_t *flags, uint8_t n);
/* Where the actuators are, in the command frame (µrad): what ENABLE, a watchdog trip and an e-stop
 * set the targets to. On a board whose sensors are its actuators' own (smart servos, encoders on
 * the motors) this is the measured position. */
void hal_command_frame(int32_t *pos_urad, uint8_t n);
/* Drive the joints: targets in µrad (already clamped to the limits); `enabled` 0: torque off /
 * brakes on. Called after every change and every servo period while enabled. */
void hal_write_joints(const int32_t *target_urad, uint8_t n, uint8_t enabled);
/* The IMU, where the board has one: orientation in the world (unit quaternion w, x, y, z times
 * HIL_IMU_QUAT_SCALE), angular rate (mrad/s) and acceleration (mm/s²) in the body frame. Returns 0
 * without one (STATE then carries no IMU block). */
int hal_read_imu(int16_t quat[4], int16_t gyro_mrad_s[3], int16_t acc_mm_s2[3]);
/* The supply voltage in mV. */
uint16_t hal_supply_mv(void);
/* The MCU's 96-bit unique id. */
void hal_unique_id(uint8_t uid[12]);
/* A random 32-bit number for the boot id (any entropy: ADC noise, the clock at the first byte). */
uint32_t hal_random32(void);
/* Persistent storage for parameters: read/write `len` bytes; 0 on success. */
int hal_storage_read(void *data, size_t len);
int hal_storage_write(const void *data, size_t len);
/* HOME (PUMA6, incremental encoders): make the masked joints' positions known (method 0: the arm
 * stands in its home pose now); 0 on success. */
int hal_home(uint32_t joint_mask, uint8_t method);
/* Reset the MCU (REBOOT); on the host build, a simulated power cycle. */
void hal_reset(void);

#endif
