"""The servos' control tables, one per family, and the servo models, one entry each: where each
register is (address, size), how its value is encoded, whether it lives in EEPROM or is read-only,
and what it holds from the factory; per model its number, name, resolution and units.

Everything that speaks to a servo reads these: the drivers (their registers' addresses and sizes),
the emulators (their memory, factory state, access rules and encodings), `hil ports --probe` and
the board configs (a model's ticks per radian). Adding a servo model is one entry in `MODELS`;
adding a register, one line in its family's table. Register names are LeRobot's, where LeRobot has
the register (its `*_CONTROL_TABLE`s), so a LeRobot user reads the same words.

Sources: ROBOTIS e-manual pages of the X series (XM430-W350, XL430-W250, XL330-M288) and of the AX
and MX 1.0 servos; Feetech's STS/SMS and SCS memory tables as the vendor SDK and LeRobot's
`feetech/tables.py` give them (research/buses.md §1.8, §2, §3.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reg:
    """One register: `address` and `size` in bytes; `sign` None (unsigned), 0 (two's complement)
    or N (sign-magnitude, the sign in bit N: Feetech's); `eeprom` (kept across power cycles; on
    Dynamixel writable only with the torque off); `read_only`; `default` its factory value."""

    address: int
    size: int
    sign: int | None = None
    eeprom: bool = False
    read_only: bool = False
    default: int = 0

    def encode(self, value: int, big_endian: bool = False) -> bytes:
        """`value` as the register holds it (little-endian unless `big_endian`: Feetech SCS)."""
        raw = int(value)
        if self.sign and raw < 0:
            raw = (-raw) | (1 << self.sign)
        raw &= (1 << (8 * self.size)) - 1
        return raw.to_bytes(self.size, "big" if big_endian else "little")

    def decode(self, data: bytes, big_endian: bool = False) -> int:
        raw = int.from_bytes(data[:self.size], "big" if big_endian else "little")
        if self.sign is None:
            return raw
        if self.sign:   # sign-magnitude
            mag = raw & ((1 << self.sign) - 1)
            return -mag if raw & (1 << self.sign) else mag
        return raw - (1 << (8 * self.size)) if raw >= 1 << (8 * self.size - 1) else raw


def _e(address: int, size: int, default: int = 0, sign: int | None = None, read_only: bool = False) -> Reg:
    return Reg(address, size, sign, True, read_only, default)


def _r(address: int, size: int, sign: int | None = None) -> Reg:
    return Reg(address, size, sign, False, True)


# Dynamixel X series, Protocol 2.0 (EEPROM below 64: writable with the torque off only)
X_SERIES = {
    "Model_Number": _e(0, 2, read_only=True), "Model_Information": _e(2, 4, read_only=True),
    "Firmware_Version": _e(6, 1, 45, read_only=True), "ID": _e(7, 1, 1), "Baud_Rate": _e(8, 1, 1),
    "Return_Delay_Time": _e(9, 1, 250), "Drive_Mode": _e(10, 1), "Operating_Mode": _e(11, 1, 3),
    "Secondary_ID": _e(12, 1, 255), "Protocol_Type": _e(13, 1, 2), "Homing_Offset": _e(20, 4, 0, sign=0),
    "Moving_Threshold": _e(24, 4, 10), "Temperature_Limit": _e(31, 1, 80), "Max_Voltage_Limit": _e(32, 2, 160),
    "Min_Voltage_Limit": _e(34, 2, 95), "PWM_Limit": _e(36, 2, 885), "Current_Limit": _e(38, 2, 1193),
    "Velocity_Limit": _e(44, 4, 200), "Max_Position_Limit": _e(48, 4, 4095), "Min_Position_Limit": _e(52, 4, 0),
    "Startup_Configuration": _e(60, 1), "Shutdown": _e(63, 1, 52),
    "Torque_Enable": Reg(64, 1), "LED": Reg(65, 1), "Status_Return_Level": Reg(68, 1, default=2),
    "Registered_Instruction": _r(69, 1), "Hardware_Error_Status": _r(70, 1),
    "Velocity_I_Gain": Reg(76, 2, default=1920), "Velocity_P_Gain": Reg(78, 2, default=100),
    "Position_D_Gain": Reg(80, 2), "Position_I_Gain": Reg(82, 2), "Position_P_Gain": Reg(84, 2, default=800),
    "Feedforward_2nd_Gain": Reg(88, 2), "Feedforward_1st_Gain": Reg(90, 2), "Bus_Watchdog": Reg(98, 1),
    "Goal_PWM": Reg(100, 2, 0), "Goal_Current": Reg(102, 2, 0), "Goal_Velocity": Reg(104, 4, 0),
    "Profile_Acceleration": Reg(108, 4), "Profile_Velocity": Reg(112, 4), "Goal_Position": Reg(116, 4, 0),
    "Realtime_Tick": _r(120, 2), "Moving": _r(122, 1), "Moving_Status": _r(123, 1), "Present_PWM": _r(124, 2, 0),
    "Present_Current": _r(126, 2, 0), "Present_Velocity": _r(128, 4, 0), "Present_Position": _r(132, 4, 0),
    "Velocity_Trajectory": _r(136, 4, 0), "Position_Trajectory": _r(140, 4, 0),
    "Present_Input_Voltage": _r(144, 2), "Present_Temperature": _r(146, 1),
}

# Dynamixel AX / MX, Protocol 1.0 (EEPROM below 24)
AX_SERIES = {
    "Model_Number": _e(0, 2, read_only=True), "Firmware_Version": _e(2, 1, 24, read_only=True), "ID": _e(3, 1, 1),
    "Baud_Rate": _e(4, 1, 1), "Return_Delay_Time": _e(5, 1, 250), "CW_Angle_Limit": _e(6, 2, 0),
    "CCW_Angle_Limit": _e(8, 2, 1023), "Temperature_Limit": _e(11, 1, 70), "Min_Voltage_Limit": _e(12, 1, 60),
    "Max_Voltage_Limit": _e(13, 1, 140), "Max_Torque": _e(14, 2, 1023), "Status_Return_Level": _e(16, 1, 2),
    "Alarm_LED": _e(17, 1, 36), "Shutdown": _e(18, 1, 36),
    "Torque_Enable": Reg(24, 1), "LED": Reg(25, 1), "CW_Compliance_Margin": Reg(26, 1, default=1),
    "CCW_Compliance_Margin": Reg(27, 1, default=1), "CW_Compliance_Slope": Reg(28, 1, default=32),
    "CCW_Compliance_Slope": Reg(29, 1, default=32), "Goal_Position": Reg(30, 2), "Moving_Speed": Reg(32, 2),
    "Torque_Limit": Reg(34, 2, default=1023), "Present_Position": _r(36, 2), "Present_Speed": _r(38, 2, 10),
    "Present_Load": _r(40, 2, 10), "Present_Voltage": _r(42, 1), "Present_Temperature": _r(43, 1),
    "Registered": _r(44, 1), "Moving": _r(46, 1), "Lock": Reg(47, 1), "Punch": Reg(48, 2, default=32),
}

# Feetech STS / SMS (protocol 0: little-endian; EEPROM below 40, its writes kept only while Lock is 0)
STS_SERIES = {
    "Firmware_Major_Version": _e(0, 1, 3, read_only=True), "Firmware_Minor_Version": _e(1, 1, 10, read_only=True),
    "Model_Number": _e(3, 2, read_only=True), "ID": _e(5, 1, 1), "Baud_Rate": _e(6, 1, 0),
    "Return_Delay_Time": _e(7, 1, 0), "Response_Status_Level": _e(8, 1, 1), "Min_Position_Limit": _e(9, 2, 0),
    "Max_Position_Limit": _e(11, 2, 4095), "Max_Temperature_Limit": _e(13, 1, 70), "Max_Voltage_Limit": _e(14, 1, 140),
    "Min_Voltage_Limit": _e(15, 1, 40), "Max_Torque_Limit": _e(16, 2, 1000), "Phase": _e(18, 1, 12),
    "Unloading_Condition": _e(19, 1, 44), "LED_Alarm_Condition": _e(20, 1, 47), "P_Coefficient": _e(21, 1, 32),
    "D_Coefficient": _e(22, 1, 32), "I_Coefficient": _e(23, 1, 0), "Minimum_Startup_Force": _e(24, 2, 16),
    "CW_Dead_Zone": _e(26, 1, 1), "CCW_Dead_Zone": _e(27, 1, 1), "Protection_Current": _e(28, 2, 500),
    "Angular_Resolution": _e(30, 1, 1), "Homing_Offset": _e(31, 2, 0, sign=11), "Operating_Mode": _e(33, 1, 0),
    "Protective_Torque": _e(34, 1, 20), "Protection_Time": _e(35, 1, 200), "Overload_Torque": _e(36, 1, 80),
    "Velocity_closed_loop_P_proportional_coefficient": _e(37, 1, 10),
    "Over_Current_Protection_Time": _e(38, 1, 200), "Velocity_closed_loop_I_integral_coefficient": _e(39, 1, 200),
    "Torque_Enable": Reg(40, 1), "Acceleration": Reg(41, 1), "Goal_Position": Reg(42, 2, 15),
    "Goal_Time": Reg(44, 2), "Goal_Velocity": Reg(46, 2, 15), "Torque_Limit": Reg(48, 2, default=1000),
    "Lock": Reg(55, 1, default=1), "Present_Position": _r(56, 2, 15), "Present_Velocity": _r(58, 2, 15),
    "Present_Load": _r(60, 2, 10), "Present_Voltage": _r(62, 1), "Present_Temperature": _r(63, 1),
    "Status": _r(65, 1), "Moving": _r(66, 1), "Present_Current": _r(69, 2, 15),
    "Maximum_Acceleration": Reg(85, 1, default=254),
}

# Feetech SCS (protocol 1: big-endian words, no Sync Read, Lock at 48, no Homing Offset)
SCS_SERIES = {
    "Firmware_Major_Version": _e(0, 1, 1, read_only=True), "Firmware_Minor_Version": _e(1, 1, 0, read_only=True),
    "Model_Number": _e(3, 2, read_only=True), "ID": _e(5, 1, 1), "Baud_Rate": _e(6, 1, 0),
    "Return_Delay_Time": _e(7, 1, 0), "Response_Status_Level": _e(8, 1, 1), "Min_Position_Limit": _e(9, 2, 0),
    "Max_Position_Limit": _e(11, 2, 1023), "Max_Temperature_Limit": _e(13, 1, 70), "Max_Voltage_Limit": _e(14, 1, 80),
    "Min_Voltage_Limit": _e(15, 1, 40), "Max_Torque_Limit": _e(16, 2, 1000), "Phase": _e(18, 1, 0),
    "Unloading_Condition": _e(19, 1, 37), "LED_Alarm_Condition": _e(20, 1, 37), "P_Coefficient": _e(21, 1, 32),
    "D_Coefficient": _e(22, 1, 32), "I_Coefficient": _e(23, 1, 0), "Minimum_Startup_Force": _e(24, 2, 16),
    "CW_Dead_Zone": _e(26, 1, 1), "CCW_Dead_Zone": _e(27, 1, 1), "Protective_Torque": _e(37, 1, 20),
    "Protection_Time": _e(38, 1, 200),
    "Torque_Enable": Reg(40, 1), "Acceleration": Reg(41, 1), "Goal_Position": Reg(42, 2, 15),
    "Running_Time": Reg(44, 2), "Goal_Velocity": Reg(46, 2, 15), "Lock": Reg(48, 1, default=1),
    "Present_Position": _r(56, 2, 15), "Present_Velocity": _r(58, 2, 15), "Present_Load": _r(60, 2, 10),
    "Present_Voltage": _r(62, 1), "Present_Temperature": _r(63, 1), "Sync_Write_Flag": _r(64, 1),
    "Status": _r(65, 1), "Moving": _r(66, 1),
}

TABLE_SIZES = {id(X_SERIES): 256, id(AX_SERIES): 74, id(STS_SERIES): 86, id(SCS_SERIES): 70}


@dataclass(frozen=True)
class ServoModel:
    """One servo model: the bus it speaks, the number it reports, its control table (a family's,
    with the model's own factory values in `defaults`), the ticks its encoder counts over
    `degrees` (360: a whole turn, wrapping there; 300: AX/SCS, a dead band, no wrap), and units."""

    bus: str
    name: str
    number: int
    table: dict = field(repr=False, compare=False, hash=False)
    ticks: int = 4096
    degrees: float = 360.0
    big_endian: bool = False
    sync_read: bool = True
    current_unit_mA: float | None = None   # Present Current's unit (None: the model reports no current)
    velocity_unit_rpm: float = 0.229       # Present Velocity's unit
    modes: tuple[int, ...] = (3,)          # operating modes it has (Dynamixel: 3 position, 4 extended, 5 current-based)
    stall_mA: float = 1400.0               # its current at full torque
    defaults: tuple[tuple[str, int], ...] = ()   # factory values beside its family's

    @property
    def ticks_per_rev(self) -> int:
        return round(self.ticks * 360.0 / self.degrees)

    @property
    def ticks_per_rad(self) -> float:
        return self.ticks / math.radians(self.degrees)

    @property
    def wraps(self) -> bool:
        """Its readings wrap after a whole turn (else they end at a dead band)."""
        return self.degrees == 360.0

    def reg(self, name: str) -> Reg:
        """Its register `name`; KeyError naming the model when it has none."""
        try:
            return self.table[name]
        except KeyError:
            raise KeyError(f"{self.name} has no register {name!r}") from None

    def factory(self, name: str) -> int:
        """What register `name` holds from the factory on this model."""
        return dict(self.defaults).get(name, self.table[name].default)

    @property
    def table_size(self) -> int:
        return TABLE_SIZES[id(self.table)]


MODELS: tuple[ServoModel, ...] = (
    # Dynamixel X (Protocol 2.0)
    ServoModel("dynamixel2", "XM430-W350", 1020, X_SERIES, current_unit_mA=2.69, modes=(0, 1, 3, 4, 5, 16),
               stall_mA=2300.0, defaults=(("Velocity_Limit", 350),)),
    ServoModel("dynamixel2", "XM430-W210", 1030, X_SERIES, current_unit_mA=2.69, modes=(0, 1, 3, 4, 5, 16),
               stall_mA=2300.0, defaults=(("Velocity_Limit", 330),)),
    ServoModel("dynamixel2", "XL430-W250", 1060, X_SERIES, current_unit_mA=None, modes=(1, 3, 4, 16),
               stall_mA=1400.0, defaults=(("Velocity_Limit", 265), ("Position_P_Gain", 640),
                                          ("Position_D_Gain", 4000), ("Current_Limit", 0))),
    ServoModel("dynamixel2", "XL330-M288", 1200, X_SERIES, current_unit_mA=1.0, modes=(0, 1, 3, 4, 5, 16),
               stall_mA=1500.0, defaults=(("Velocity_Limit", 445), ("Position_P_Gain", 400), ("Current_Limit", 1750),
                                          ("Temperature_Limit", 70), ("Max_Voltage_Limit", 70),
                                          ("Min_Voltage_Limit", 35), ("Shutdown", 53))),
    ServoModel("dynamixel2", "XL330-M077", 1190, X_SERIES, current_unit_mA=1.0, modes=(0, 1, 3, 4, 5, 16),
               stall_mA=1500.0, defaults=(("Velocity_Limit", 1620), ("Position_P_Gain", 400),
                                          ("Current_Limit", 1750), ("Temperature_Limit", 70),
                                          ("Max_Voltage_Limit", 70), ("Min_Voltage_Limit", 35), ("Shutdown", 53))),
    ServoModel("dynamixel2", "XM540-W270", 1120, X_SERIES, current_unit_mA=2.69, modes=(0, 1, 3, 4, 5, 16),
               stall_mA=4400.0, defaults=(("Velocity_Limit", 128), ("Current_Limit", 2047))),
    # Dynamixel AX / MX (Protocol 1.0)
    ServoModel("dynamixel1", "AX-12A", 12, AX_SERIES, ticks=1024, degrees=300.0, sync_read=False,
               velocity_unit_rpm=0.111, stall_mA=1500.0),
    ServoModel("dynamixel1", "AX-18A", 18, AX_SERIES, ticks=1024, degrees=300.0, sync_read=False,
               velocity_unit_rpm=0.111, stall_mA=2200.0),
    ServoModel("dynamixel1", "MX-28", 29, AX_SERIES, ticks=4096, degrees=360.0, sync_read=False,
               velocity_unit_rpm=0.114, stall_mA=1400.0, defaults=(("CCW_Angle_Limit", 4095),)),
    ServoModel("dynamixel1", "MX-64", 310, AX_SERIES, ticks=4096, degrees=360.0, sync_read=False,
               velocity_unit_rpm=0.114, stall_mA=4100.0, defaults=(("CCW_Angle_Limit", 4095),)),
    # Feetech
    ServoModel("feetech", "STS3215", 777, STS_SERIES, current_unit_mA=6.5, velocity_unit_rpm=60.0 / 4096,
               stall_mA=2700.0),
    ServoModel("feetech", "STS3250", 2825, STS_SERIES, current_unit_mA=6.5, velocity_unit_rpm=60.0 / 4096,
               stall_mA=3000.0),
    ServoModel("feetech", "SM8512BL", 11272, STS_SERIES, current_unit_mA=6.5, velocity_unit_rpm=60.0 / 4096,
               stall_mA=6000.0),
    ServoModel("feetech", "SCS0009", 1284, SCS_SERIES, ticks=1024, degrees=300.0, big_endian=True, sync_read=False,
               velocity_unit_rpm=60.0 / 1024, stall_mA=800.0),
)


def model(bus: str, number: int) -> ServoModel | None:
    """The model a servo on `bus` reports by `number`, or None for one not in MODELS."""
    return _BY_NUMBER.get((bus, number))


def model_named(name: str | None, bus: str | None = None) -> ServoModel | None:
    """The model called `name` (case-insensitive; on `bus` when given), or None."""
    m = _BY_NAME.get((name or "").lower())
    return m if m is not None and (bus is None or m.bus == bus) else None


def models_of(bus: str) -> dict[int, ServoModel]:
    """The models of one bus, by the number each reports."""
    return {m.number: m for m in MODELS if m.bus == bus}


def family(bus: str) -> dict:
    """The control table the drivers of `bus` address every servo through (the family's)."""
    return {"dynamixel2": X_SERIES, "dynamixel1": AX_SERIES, "feetech": STS_SERIES}[bus]


_BY_NUMBER = {(m.bus, m.number): m for m in MODELS}
_BY_NAME = {m.name.lower(): m for m in MODELS}
