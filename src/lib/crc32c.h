/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of every binlog record.
 *
 * Contract: crc32c(0, p, n) is the standard CRC-32C of n bytes (initial
 * value and final xor included), and crc32c(crc32c(0, a, n), b, m) equals
 * the CRC of a followed by b. Uses the SSE4.2 instruction when the CPU has
 * it, a table otherwise; both give the same result.
 */
#ifndef TUBED_CRC32C_H
#define TUBED_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *p, size_t n);
/* The table version alone, so tests can check both paths agree. */
uint32_t crc32c_portable(uint32_t crc, const void *p, size_t n);

#endif
