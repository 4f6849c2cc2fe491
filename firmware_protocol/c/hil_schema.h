/* CRC-32 of the canonical message table (firmware_protocol/messages.py SCHEMA_HASH), sent in
 * HELLO_REPLY. tests/unit/test_c_firmware.py checks it against the Python definition. */
#ifndef HIL_SCHEMA_H
#define HIL_SCHEMA_H
#define HIL_SCHEMA_HASH 0x5AD35A73u
#endif
