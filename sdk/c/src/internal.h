/* What the SDK's own files share: the arena (in and out buffers, the descriptor the host
 * reads) and little-endian access. Not for plugins. */
#ifndef TESSERA_INTERNAL_H
#define TESSERA_INTERNAL_H

#include "tessera.h"

/* The arena: `in` (the host writes), `out` (the guest writes) and the 16-byte descriptor
 * {u32 in_off, in_cap, out_off, out_cap} at a fixed address. */
extern uint8_t *tp_in;
extern uint32_t tp_in_cap;
extern uint8_t *tp_outbuf;
extern uint32_t tp_out_cap;

/* Allocates the buffers once (the first tp_arena). */
void tp_arena_ensure(void);
/* Makes out hold at least `need` bytes, keeping its contents; 0 if memory ran out. */
int tp_out_reserve(uint32_t need);

static inline uint32_t tp_load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void tp_store32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void tp_store64(uint8_t *p, uint64_t v) {
    tp_store32(p, (uint32_t)v);
    tp_store32(p + 4, (uint32_t)(v >> 32));
}
static inline tp_action tp_pack(uint32_t action, uint32_t count, uint32_t len) {
    return (tp_action)(((uint64_t)action << 56) | ((uint64_t)(count & 0xFFFFFF) << 32) | len);
}

/* Writes the manifest's encoding into out at 0; returns its length. */
uint32_t tp_manifest_encode(tp_manifest *m);
tp_manifest *tp_manifest_new(void);

#endif
