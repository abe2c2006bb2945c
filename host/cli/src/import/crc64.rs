//! CRC-64/Jones, as Redis checksums its RDB files (`src/crc64.c`): reflected polynomial
//! 0xad93d23594c935a9, initial value 0, no final xor. The checksum covers every byte of the
//! file before its last 8, which hold it little-endian; 0 there means "not computed".

/// The reflected Jones polynomial.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

/// One table, built at compile time: byte-at-a-time is fast enough next to the network.
const TABLE: [u64; 256] = build_table();

const fn build_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Continues a CRC-64/Jones over `data`, starting from `crc` (0 for a fresh one).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_check_value_redis_tests_with() {
        // redis src/crc64.c: crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9ca
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn can_be_continued_in_pieces() {
        let data = b"This is a test of the emergency broadcast system.";
        let whole = crc64(0, data);
        let (a, b) = data.split_at(17);
        assert_eq!(crc64(crc64(0, a), b), whole);
    }
}
