/* hash.c -- the key hash functions, bit-exact with the systems they come
 * from.
 *
 * twemproxy's hashes take `const char *` keys and, on x86-64 where char is
 * signed, several of them widen a byte >= 0x80 to 0xffffffxx before mixing
 * it in. Placement has to match twemproxy's, so those functions read
 * bytes through sx() below, on every platform; the others read unsigned
 * bytes, exactly as their originals do. Each function's comment says which.
 *
 * Jedis hashes with MurmurHash64A (seed 0x1234ABCD) and, optionally, the
 * first four bytes of MD5; the jedis distribution in ring.c uses those. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ring/ring.h"

/* A key byte as x86-64 twemproxy reads it: a signed char widened. */
static inline uint32_t sx(const unsigned char *p)
{
    return (uint32_t)(int32_t)(signed char)*p;
}

static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ---- MD5 (RFC 1321) ---------------------------------------------------- */

static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee,
    0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be,
    0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa,
    0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
    0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05,
    0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039,
    0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1,
    0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static const uint8_t md5_s[16] = {7, 12, 17, 22, 5, 9, 14, 20,
                                  4, 11, 16, 23, 6, 10, 15, 21};

static void md5_block(uint32_t st[4], const unsigned char *blk)
{
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
    for (unsigned i = 0; i < 64; i++) {
        uint32_t f;
        unsigned g, round = i / 16;
        switch (round) {
        case 0:  f = (b & c) | (~b & d); g = i; break;
        case 1:  f = (d & b) | (~d & c); g = (5 * i + 1) % 16; break;
        case 2:  f = b ^ c ^ d;          g = (3 * i + 5) % 16; break;
        default: f = c ^ (b | ~d);       g = (7 * i) % 16; break;
        }
        f += a + md5_k[i] + le32(blk + 4 * g);
        unsigned s = md5_s[round * 4 + i % 4];
        a = d;
        d = c;
        c = b;
        b += (f << s) | (f >> (32 - s));
    }
    st[0] += a;
    st[1] += b;
    st[2] += c;
    st[3] += d;
}

void ring_md5(const void *buf, size_t len, unsigned char out[16])
{
    uint32_t st[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    const unsigned char *p = buf;
    unsigned char tail[128];
    size_t full = len & ~(size_t)63, rest = len - full, tlen;
    uint64_t bits = (uint64_t)len * 8;

    for (size_t off = 0; off < full; off += 64)
        md5_block(st, p + off);

    /* The last bytes, 0x80, zeros, and the bit length fill one or two
     * more blocks. */
    memcpy(tail, p + full, rest);
    tail[rest] = 0x80;
    tlen = rest + 1 + 8 <= 64 ? 64 : 128;
    memset(tail + rest + 1, 0, tlen - rest - 1 - 8);
    for (unsigned i = 0; i < 8; i++)
        tail[tlen - 8 + i] = (unsigned char)(bits >> (8 * i));
    for (size_t off = 0; off < tlen; off += 64)
        md5_block(st, tail + off);

    for (unsigned i = 0; i < 4; i++)
        for (unsigned j = 0; j < 4; j++)
            out[4 * i + j] = (unsigned char)(st[i] >> (8 * j));
}

/* ---- twemproxy's 32-bit hashes ---------------------------------------- */

/* CRC-32 (reflected polynomial 0xEDB88320), the table every CRC-32 uses. */
static const uint32_t crc32_tab[256] = {
    0x00000000, 0x77073096, 0xee0e612c, 0x990951ba, 0x076dc419, 0x706af48f,
    0xe963a535, 0x9e6495a3, 0x0edb8832, 0x79dcb8a4, 0xe0d5e91e, 0x97d2d988,
    0x09b64c2b, 0x7eb17cbd, 0xe7b82d07, 0x90bf1d91, 0x1db71064, 0x6ab020f2,
    0xf3b97148, 0x84be41de, 0x1adad47d, 0x6ddde4eb, 0xf4d4b551, 0x83d385c7,
    0x136c9856, 0x646ba8c0, 0xfd62f97a, 0x8a65c9ec, 0x14015c4f, 0x63066cd9,
    0xfa0f3d63, 0x8d080df5, 0x3b6e20c8, 0x4c69105e, 0xd56041e4, 0xa2677172,
    0x3c03e4d1, 0x4b04d447, 0xd20d85fd, 0xa50ab56b, 0x35b5a8fa, 0x42b2986c,
    0xdbbbc9d6, 0xacbcf940, 0x32d86ce3, 0x45df5c75, 0xdcd60dcf, 0xabd13d59,
    0x26d930ac, 0x51de003a, 0xc8d75180, 0xbfd06116, 0x21b4f4b5, 0x56b3c423,
    0xcfba9599, 0xb8bda50f, 0x2802b89e, 0x5f058808, 0xc60cd9b2, 0xb10be924,
    0x2f6f7c87, 0x58684c11, 0xc1611dab, 0xb6662d3d, 0x76dc4190, 0x01db7106,
    0x98d220bc, 0xefd5102a, 0x71b18589, 0x06b6b51f, 0x9fbfe4a5, 0xe8b8d433,
    0x7807c9a2, 0x0f00f934, 0x9609a88e, 0xe10e9818, 0x7f6a0dbb, 0x086d3d2d,
    0x91646c97, 0xe6635c01, 0x6b6b51f4, 0x1c6c6162, 0x856530d8, 0xf262004e,
    0x6c0695ed, 0x1b01a57b, 0x8208f4c1, 0xf50fc457, 0x65b0d9c6, 0x12b7e950,
    0x8bbeb8ea, 0xfcb9887c, 0x62dd1ddf, 0x15da2d49, 0x8cd37cf3, 0xfbd44c65,
    0x4db26158, 0x3ab551ce, 0xa3bc0074, 0xd4bb30e2, 0x4adfa541, 0x3dd895d7,
    0xa4d1c46d, 0xd3d6f4fb, 0x4369e96a, 0x346ed9fc, 0xad678846, 0xda60b8d0,
    0x44042d73, 0x33031de5, 0xaa0a4c5f, 0xdd0d7cc9, 0x5005713c, 0x270241aa,
    0xbe0b1010, 0xc90c2086, 0x5768b525, 0x206f85b3, 0xb966d409, 0xce61e49f,
    0x5edef90e, 0x29d9c998, 0xb0d09822, 0xc7d7a8b4, 0x59b33d17, 0x2eb40d81,
    0xb7bd5c3b, 0xc0ba6cad, 0xedb88320, 0x9abfb3b6, 0x03b6e20c, 0x74b1d29a,
    0xead54739, 0x9dd277af, 0x04db2615, 0x73dc1683, 0xe3630b12, 0x94643b84,
    0x0d6d6a3e, 0x7a6a5aa8, 0xe40ecf0b, 0x9309ff9d, 0x0a00ae27, 0x7d079eb1,
    0xf00f9344, 0x8708a3d2, 0x1e01f268, 0x6906c2fe, 0xf762575d, 0x806567cb,
    0x196c3671, 0x6e6b06e7, 0xfed41b76, 0x89d32be0, 0x10da7a5a, 0x67dd4acc,
    0xf9b9df6f, 0x8ebeeff9, 0x17b7be43, 0x60b08ed5, 0xd6d6a3e8, 0xa1d1937e,
    0x38d8c2c4, 0x4fdff252, 0xd1bb67f1, 0xa6bc5767, 0x3fb506dd, 0x48b2364b,
    0xd80d2bda, 0xaf0a1b4c, 0x36034af6, 0x41047a60, 0xdf60efc3, 0xa867df55,
    0x316e8eef, 0x4669be79, 0xcb61b38c, 0xbc66831a, 0x256fd2a0, 0x5268e236,
    0xcc0c7795, 0xbb0b4703, 0x220216b9, 0x5505262f, 0xc5ba3bbe, 0xb2bd0b28,
    0x2bb45a92, 0x5cb36a04, 0xc2d7ffa7, 0xb5d0cf31, 0x2cd99e8b, 0x5bdeae1d,
    0x9b64c2b0, 0xec63f226, 0x756aa39c, 0x026d930a, 0x9c0906a9, 0xeb0e363f,
    0x72076785, 0x05005713, 0x95bf4a82, 0xe2b87a14, 0x7bb12bae, 0x0cb61b38,
    0x92d28e9b, 0xe5d5be0d, 0x7cdcefb7, 0x0bdbdf21, 0x86d3d2d4, 0xf1d4e242,
    0x68ddb3f8, 0x1fda836e, 0x81be16cd, 0xf6b9265b, 0x6fb077e1, 0x18b74777,
    0x88085ae6, 0xff0f6a70, 0x66063bca, 0x11010b5c, 0x8f659eff, 0xf862ae69,
    0x616bffd3, 0x166ccf45, 0xa00ae278, 0xd70dd2ee, 0x4e048354, 0x3903b3c2,
    0xa7672661, 0xd06016f7, 0x4969474d, 0x3e6e77db, 0xaed16a4a, 0xd9d65adc,
    0x40df0b66, 0x37d83bf0, 0xa9bcae53, 0xdebb9ec5, 0x47b2cf7f, 0x30b5ffe9,
    0xbdbdf21c, 0xcabac28a, 0x53b39330, 0x24b4a3a6, 0xbad03605, 0xcdd70693,
    0x54de5729, 0x23d967bf, 0xb3667a2e, 0xc4614ab8, 0x5d681b02, 0x2a6f2b94,
    0xb40bbe37, 0xc30c8ea1, 0x5a05df1b, 0x2d02ef8d,
};

/* CRC-16/XMODEM (polynomial 0x1021), the table twemproxy 0.5.0 uses. */
static const uint16_t crc16_tab[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
    0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
    0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de,
    0x2462, 0x3443, 0x0420, 0x1401, 0x64e6, 0x74c7, 0x44a4, 0x5485,
    0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4,
    0xb75b, 0xa77a, 0x9719, 0x8738, 0xf7df, 0xe7fe, 0xd79d, 0xc7bc,
    0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b,
    0x5af5, 0x4ad4, 0x7ab7, 0x6a96, 0x1a71, 0x0a50, 0x3a33, 0x2a12,
    0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41,
    0xedae, 0xfd8f, 0xcdec, 0xddcd, 0xad2a, 0xbd0b, 0x8d68, 0x9d49,
    0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78,
    0x9188, 0x81a9, 0xb1ca, 0xa1eb, 0xd10c, 0xc12d, 0xf14e, 0xe16f,
    0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e,
    0x02b1, 0x1290, 0x22f3, 0x32d2, 0x4235, 0x5214, 0x6277, 0x7256,
    0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405,
    0xa7db, 0xb7fa, 0x8799, 0x97b8, 0xe75f, 0xf77e, 0xc71d, 0xd73c,
    0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab,
    0x5844, 0x4865, 0x7806, 0x6827, 0x18c0, 0x08e1, 0x3882, 0x28a3,
    0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92,
    0xfd2e, 0xed0f, 0xdd6c, 0xcd4d, 0xbdaa, 0xad8b, 0x9de8, 0x8dc9,
    0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8,
    0x6e17, 0x7e36, 0x4e55, 0x5e74, 0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

/* twemproxy 0.5.0's "crc16": the XMODEM step, but on a 32-bit state that
 * is never cut back to 16 bits, so the value grows past 0xffff. (Later
 * twemproxy switched to CRC-16/ARC; 0.5.0 is what is deployed.) */
static uint32_t hash_crc16(const unsigned char *k, size_t n)
{
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i++)
        crc = (crc << 8) ^ crc16_tab[((crc >> 8) ^ k[i]) & 0xff];
    return crc;
}

/* libmemcached's "crc32": a real CRC-32 cut down to 15 bits. */
static uint32_t hash_crc32(const unsigned char *k, size_t n)
{
    uint32_t crc = UINT32_MAX;
    for (size_t i = 0; i < n; i++)
        crc = (crc >> 8) ^ crc32_tab[(crc ^ k[i]) & 0xff];
    return ((~crc) >> 16) & 0x7fff;
}

/* The standard CRC-32. */
static uint32_t hash_crc32a(const unsigned char *k, size_t n)
{
    uint32_t crc = UINT32_MAX;
    for (size_t i = 0; i < n; i++)
        crc = (crc >> 8) ^ crc32_tab[(crc ^ k[i]) & 0xff];
    return ~crc;
}

/* Bob Jenkins' one-at-a-time; signed bytes. */
static uint32_t hash_one_at_a_time(const unsigned char *k, size_t n)
{
    uint32_t h = 0;
    for (size_t i = 0; i < n; i++) {
        h += sx(k + i);
        h += h << 10;
        h ^= h >> 6;
    }
    h += h << 3;
    h ^= h >> 11;
    h += h << 15;
    return h;
}

/* FNV-1 with 64-bit state, truncated; signed bytes (sign-extended to 64). */
static uint32_t hash_fnv1_64(const unsigned char *k, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h *= UINT64_C(0x100000001b3);
        h ^= (uint64_t)(int64_t)(signed char)k[i];
    }
    return (uint32_t)h;
}

/* twemproxy's "fnv1a_64" is FNV-1a with the 64-bit constants cut to 32
 * bits (offset 0x84222325, prime 0x1b3); signed bytes. */
static uint32_t hash_fnv1a_64(const unsigned char *k, size_t n)
{
    uint32_t h = 0x84222325u;
    for (size_t i = 0; i < n; i++) {
        h ^= sx(k + i);
        h *= 0x1b3u;
    }
    return h;
}

/* FNV-1, 32-bit; signed bytes. */
static uint32_t hash_fnv1_32(const unsigned char *k, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h *= 16777619u;
        h ^= sx(k + i);
    }
    return h;
}

/* FNV-1a, 32-bit; signed bytes. */
static uint32_t hash_fnv1a_32(const unsigned char *k, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= sx(k + i);
        h *= 16777619u;
    }
    return h;
}

/* Paul Hsieh's SuperFastHash. Unsigned bytes, except the third byte of a
 * 3-byte tail, which twemproxy reads as a signed char. */
static uint32_t hash_hsieh(const unsigned char *k, size_t n)
{
    uint32_t h = 0, tmp;
    size_t rem = n & 3;

    if (n == 0)
        return 0;
    for (n >>= 2; n > 0; n--, k += 4) {
        h += (uint32_t)k[0] | (uint32_t)k[1] << 8;
        tmp = ((uint32_t)k[2] | (uint32_t)k[3] << 8) << 11 ^ h;
        h = (h << 16) ^ tmp;
        h += h >> 11;
    }
    switch (rem) {
    case 3:
        h += (uint32_t)k[0] | (uint32_t)k[1] << 8;
        h ^= h << 16;
        h ^= sx(k + 2) << 18;
        h += h >> 11;
        break;
    case 2:
        h += (uint32_t)k[0] | (uint32_t)k[1] << 8;
        h ^= h << 11;
        h += h >> 17;
        break;
    case 1:
        h += k[0];
        h ^= h << 10;
        h += h >> 1;
        break;
    }
    h ^= h << 3;
    h += h >> 5;
    h ^= h << 4;
    h += h >> 17;
    h ^= h << 25;
    h += h >> 6;
    return h;
}

/* MurmurHash2 with twemproxy's seed (0xdeadbeef * length); unsigned. */
static uint32_t hash_murmur(const unsigned char *k, size_t n)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = (0xdeadbeefu * (uint32_t)n) ^ (uint32_t)n;

    for (; n >= 4; n -= 4, k += 4) {
        uint32_t w = le32(k);
        w *= m;
        w ^= w >> 24;
        w *= m;
        h *= m;
        h ^= w;
    }
    switch (n) {
    case 3: h ^= (uint32_t)k[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)k[1] << 8;  /* fall through */
    case 1: h ^= k[0]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

#define ROT(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

/* Bob Jenkins' lookup3 hashlittle with initval 13; unsigned bytes, little
 * endian (twemproxy's aligned fast paths read the same values). */
static uint32_t hash_jenkins(const unsigned char *k, size_t n)
{
    uint32_t a, b, c;

    a = b = c = 0xdeadbeefu + (uint32_t)n + 13;
    for (; n > 12; n -= 12, k += 12) {
        a += le32(k);
        b += le32(k + 4);
        c += le32(k + 8);
        a -= c; a ^= ROT(c, 4);  c += b;
        b -= a; b ^= ROT(a, 6);  a += c;
        c -= b; c ^= ROT(b, 8);  b += a;
        a -= c; a ^= ROT(c, 16); c += b;
        b -= a; b ^= ROT(a, 19); a += c;
        c -= b; c ^= ROT(b, 4);  b += a;
    }
    if (n == 0)
        return c;
    switch (n) {
    case 12: c += (uint32_t)k[11] << 24; /* fall through */
    case 11: c += (uint32_t)k[10] << 16; /* fall through */
    case 10: c += (uint32_t)k[9] << 8;   /* fall through */
    case 9:  c += k[8];                  /* fall through */
    case 8:  b += (uint32_t)k[7] << 24;  /* fall through */
    case 7:  b += (uint32_t)k[6] << 16;  /* fall through */
    case 6:  b += (uint32_t)k[5] << 8;   /* fall through */
    case 5:  b += k[4];                  /* fall through */
    case 4:  a += (uint32_t)k[3] << 24;  /* fall through */
    case 3:  a += (uint32_t)k[2] << 16;  /* fall through */
    case 2:  a += (uint32_t)k[1] << 8;   /* fall through */
    case 1:  a += k[0];
    }
    c ^= b; c -= ROT(b, 14);
    a ^= c; a -= ROT(c, 11);
    b ^= a; b -= ROT(a, 25);
    c ^= b; c -= ROT(b, 16);
    a ^= c; a -= ROT(c, 4);
    b ^= a; b -= ROT(a, 14);
    c ^= b; c -= ROT(b, 24);
    return c;
}

#undef ROT

/* The first four digest bytes, little endian (twemproxy's md5, and
 * Jedis's Hashing.MD5). */
static uint32_t hash_md5(const unsigned char *k, size_t n)
{
    unsigned char d[16];
    ring_md5(k, n, d);
    return le32(d);
}

/* ---- Jedis ------------------------------------------------------------- */

/* MurmurHash64A, seed 0x1234ABCD, as Jedis's MurmurHash.hash(byte[]). */
static uint64_t hash_murmur64a(const unsigned char *k, size_t n)
{
    const uint64_t m = UINT64_C(0xc6a4a7935bd1e995);
    uint64_t h = UINT64_C(0x1234ABCD) ^ ((uint64_t)n * m);

    for (; n >= 8; n -= 8, k += 8) {
        uint64_t w = le64(k);
        w *= m;
        w ^= w >> 47;
        w *= m;
        h ^= w;
        h *= m;
    }
    if (n > 0) {
        uint64_t w = 0;
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)k[i] << (8 * i);
        h ^= w;
        h *= m;
    }
    h ^= h >> 47;
    h *= m;
    h ^= h >> 47;
    return h;
}

/* ---- names and dispatch ------------------------------------------------ */

static const char *const hash_names[RING_HASH_COUNT] = {
    [RING_HASH_ONE_AT_A_TIME] = "one_at_a_time",
    [RING_HASH_MD5]           = "md5",
    [RING_HASH_CRC16]         = "crc16",
    [RING_HASH_CRC32]         = "crc32",
    [RING_HASH_CRC32A]        = "crc32a",
    [RING_HASH_FNV1_64]       = "fnv1_64",
    [RING_HASH_FNV1A_64]      = "fnv1a_64",
    [RING_HASH_FNV1_32]       = "fnv1_32",
    [RING_HASH_FNV1A_32]      = "fnv1a_32",
    [RING_HASH_HSIEH]         = "hsieh",
    [RING_HASH_MURMUR]        = "murmur",
    [RING_HASH_JENKINS]       = "jenkins",
    [RING_HASH_MURMUR64A]     = "murmur64a",
};

static const char *const dist_names[RING_DIST_COUNT] = {
    [RING_DIST_KETAMA]    = "ketama",
    [RING_DIST_JEDIS]     = "jedis",
    [RING_DIST_HASH_RING] = "hash_ring",
    [RING_DIST_MODULA]    = "modula",
    [RING_DIST_RANDOM]    = "random",
};

const char *ring_hash_name(enum ring_hash h)
{
    return (unsigned)h < RING_HASH_COUNT ? hash_names[h] : "?";
}

const char *ring_dist_name(enum ring_dist d)
{
    return (unsigned)d < RING_DIST_COUNT ? dist_names[d] : "?";
}

static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -EINVAL;
}

int ring_hash_from_name(const char *name)
{
    return name_index(hash_names, RING_HASH_COUNT, name);
}

int ring_dist_from_name(const char *name)
{
    return name_index(dist_names, RING_DIST_COUNT, name);
}

const char *ring_hash_names(void)
{
    return "one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64, fnv1a_64, "
           "fnv1_32, fnv1a_32, hsieh, murmur, jenkins, murmur64a";
}

const char *ring_dist_names(void)
{
    return "ketama, jedis, hash_ring, modula, random";
}

enum ring_hash ring_default_hash(enum ring_dist d)
{
    switch (d) {
    case RING_DIST_JEDIS:     return RING_HASH_MURMUR64A;
    case RING_DIST_HASH_RING: return RING_HASH_MD5;
    default:                  return RING_HASH_FNV1A_64;
    }
}

int ring_check_hash(enum ring_dist d, enum ring_hash h, char *err, size_t errlen)
{
    if ((unsigned)d >= RING_DIST_COUNT || (unsigned)h >= RING_HASH_COUNT) {
        snprintf(err, errlen, "unknown distribution or hash");
        return -EINVAL;
    }
    if (d == RING_DIST_JEDIS && h != RING_HASH_MURMUR64A && h != RING_HASH_MD5) {
        snprintf(err, errlen, "distribution 'jedis' hashes with murmur64a or md5, "
                 "not '%s'", hash_names[h]);
        return -EINVAL;
    }
    if (d == RING_DIST_HASH_RING && h != RING_HASH_MD5) {
        snprintf(err, errlen, "distribution 'hash_ring' hashes with md5, not '%s'",
                 hash_names[h]);
        return -EINVAL;
    }
    if (d != RING_DIST_JEDIS && h == RING_HASH_MURMUR64A) {
        snprintf(err, errlen, "hash 'murmur64a' is 64-bit and only for "
                 "distribution 'jedis', not '%s'", dist_names[d]);
        return -EINVAL;
    }
    return 0;
}

uint64_t ring_hash_raw(enum ring_hash h, const void *key, size_t len)
{
    const unsigned char *k = key;

    switch (h) {
    case RING_HASH_ONE_AT_A_TIME: return hash_one_at_a_time(k, len);
    case RING_HASH_MD5:           return hash_md5(k, len);
    case RING_HASH_CRC16:         return hash_crc16(k, len);
    case RING_HASH_CRC32:         return hash_crc32(k, len);
    case RING_HASH_CRC32A:        return hash_crc32a(k, len);
    case RING_HASH_FNV1_64:       return hash_fnv1_64(k, len);
    case RING_HASH_FNV1A_64:      return hash_fnv1a_64(k, len);
    case RING_HASH_FNV1_32:       return hash_fnv1_32(k, len);
    case RING_HASH_FNV1A_32:      return hash_fnv1a_32(k, len);
    case RING_HASH_HSIEH:         return hash_hsieh(k, len);
    case RING_HASH_MURMUR:        return hash_murmur(k, len);
    case RING_HASH_JENKINS:       return hash_jenkins(k, len);
    case RING_HASH_MURMUR64A:     return hash_murmur64a(k, len);
    case RING_HASH_COUNT:         break;
    }
    return 0;
}
