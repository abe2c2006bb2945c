/* Guest memory: a bump allocator over the linear memory (tp_alloc), and the arena the host
 * reads and writes through the descriptor. Buffers grow geometrically into fresh memory; the
 * old block is not reused (its total is bounded by the largest size, and an instance's
 * lifetime is bounded by the host, which replaces it after any fault). */
#include "internal.h"

extern unsigned char __heap_base;

static uintptr_t heap_top;

void *tp_alloc(uint32_t size) {
    if (heap_top == 0) heap_top = (uintptr_t)&__heap_base;
    uintptr_t at = (heap_top + 7) & ~(uintptr_t)7;
    uintptr_t end = at + size;
    if (end < at) return NULL;
    uintptr_t have = (uintptr_t)__builtin_wasm_memory_size(0) << 16;
    if (end > have) {
        uintptr_t pages = (end - have + 65535) >> 16;
        if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return NULL;
    }
    heap_top = end;
    /* Fresh memory is zero; a bump allocator never hands out a block twice. */
    return (void *)at;
}

/* The descriptor the host reads at tp_arena's address. */
static uint8_t desc[TP_LAYOUT_ARENA_SIZE] __attribute__((aligned(8)));

uint8_t *tp_in;
uint32_t tp_in_cap;
uint8_t *tp_outbuf;
uint32_t tp_out_cap;

#define IN_INITIAL (16u * 1024)
#define OUT_INITIAL (4u * 1024)

static void sync_desc(void) {
    tp_store32(desc, (uint32_t)(uintptr_t)tp_in);
    tp_store32(desc + 4, tp_in_cap);
    tp_store32(desc + 8, (uint32_t)(uintptr_t)tp_outbuf);
    tp_store32(desc + 12, tp_out_cap);
}

void tp_arena_ensure(void) {
    if (tp_in) return;
    tp_in = tp_alloc(IN_INITIAL);
    tp_outbuf = tp_alloc(OUT_INITIAL);
    if (!tp_in || !tp_outbuf) __builtin_trap();
    tp_in_cap = IN_INITIAL;
    tp_out_cap = OUT_INITIAL;
    sync_desc();
}

static uint32_t grown(uint32_t cap, uint32_t need) {
    while (cap < need && cap < 0x40000000u) cap *= 2;
    return cap < need ? need : cap;
}

int tp_out_reserve(uint32_t need) {
    if (need <= tp_out_cap) return 1;
    uint32_t cap = grown(tp_out_cap, need);
    uint8_t *b = tp_alloc(cap);
    if (!b) return 0;
    __builtin_memcpy(b, tp_outbuf, tp_out_cap);
    tp_outbuf = b;
    tp_out_cap = cap;
    sync_desc();
    return 1;
}

__attribute__((export_name("tp_arena"))) int32_t tp_arena(void) {
    tp_arena_ensure();
    return (int32_t)(uintptr_t)desc;
}

/* The host asks for room before it copies an input: `in` need not keep its contents. */
__attribute__((export_name("tp_reserve"))) int32_t tp_reserve(int32_t in_len, int32_t out_len) {
    tp_arena_ensure();
    if (in_len < 0 || out_len < 0 || (uint32_t)in_len > TP_LAYOUT_LEN_MASK || (uint32_t)out_len > TP_LAYOUT_LEN_MASK)
        return (int32_t)TP_STATUS_BAD_ARGUMENT;
    if ((uint32_t)in_len > tp_in_cap) {
        uint32_t cap = grown(tp_in_cap, (uint32_t)in_len);
        uint8_t *b = tp_alloc(cap);
        if (!b) {
            /* Doubling did not fit: try the exact size. */
            cap = (uint32_t)in_len;
            b = tp_alloc(cap);
            if (!b) return (int32_t)TP_STATUS_BUFFER_TOO_SMALL;
        }
        tp_in = b;
        tp_in_cap = cap;
    }
    if (!tp_out_reserve((uint32_t)out_len)) return (int32_t)TP_STATUS_BUFFER_TOO_SMALL;
    sync_desc();
    return 0;
}
