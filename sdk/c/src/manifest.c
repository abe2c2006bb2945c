/* The manifest a plugin fills in init, and its encoding for the host (sdk/ABI.md,
 * "Manifest"): hooked commands, classes, flags, key prefixes, and the optional sections of
 * what the plugin denies to every client and of its gate. */
#include "internal.h"

#define MAX_PREFIXES 64

struct tp_manifest {
    uint16_t hooks[TP_CMD_COUNT]; /* bit 15: hooked; low bits: hook flags */
    uint32_t flags, classes, tick_ms;
    tp_bytes prefixes[MAX_PREFIXES];
    uint32_t nprefixes;
    tp_bytes denied[TP_DENIED_MAX_NAMES];
    uint32_t ndenied;
    uint32_t denied_classes;
    uint32_t gate_classes, gate_max_value;
    tp_bytes gate_prefixes[MAX_PREFIXES];
    uint32_t ngate;
};

#define HOOKED 0x8000u

tp_manifest *tp_manifest_new(void) {
    tp_manifest *m = tp_alloc(sizeof *m);
    if (!m) __builtin_trap();
    m->gate_max_value = 0xFFFFFFFFu;
    return m;
}

void tp_hook(tp_manifest *m, uint16_t id) {
    if (id > 0 && id < TP_CMD_COUNT) m->hooks[id] |= HOOKED;
}
void tp_hook_values(tp_manifest *m, uint16_t id) {
    if (id > 0 && id < TP_CMD_COUNT) m->hooks[id] |= HOOKED | TP_HOOK_VALUES;
}
void tp_hook_class(tp_manifest *m, uint32_t bits) { m->classes |= bits; }
void tp_hook_all(tp_manifest *m) { m->flags |= TP_MF_ALL; }
void tp_class_values(tp_manifest *m) { m->flags |= TP_MF_CLASS_VALUES; }
void tp_want_close(tp_manifest *m) { m->flags |= TP_MF_WANT_CLOSE; }
void tp_observe_heads(tp_manifest *m) { m->flags |= TP_MF_OBSERVE_HEADS; }
void tp_tick_ms(tp_manifest *m, uint32_t ms) { m->tick_ms = ms; }

static tp_bytes copy(const void *p, uint32_t len) {
    uint8_t *b = tp_alloc(len ? len : 1);
    if (!b) __builtin_trap();
    __builtin_memcpy(b, p, len);
    tp_bytes out = {b, len};
    return out;
}

void tp_prefix(tp_manifest *m, const void *prefix, uint32_t len) {
    if (m->nprefixes < MAX_PREFIXES) m->prefixes[m->nprefixes++] = copy(prefix, len);
}

void tp_deny_to_all(tp_manifest *m, const char *name, uint32_t len) {
    if (m->ndenied < TP_DENIED_MAX_NAMES && len <= TP_DENIED_MAX_NAME_LEN) {
        m->denied[m->ndenied++] = copy(name, len);
        m->flags |= TP_MF_DENIES;
    }
}

void tp_deny_classes_to_all(tp_manifest *m, uint32_t bits) {
    m->denied_classes |= bits;
    if (bits) m->flags |= TP_MF_DENIES;
}

void tp_gate_classes(tp_manifest *m, uint32_t bits) {
    m->gate_classes |= bits;
    m->flags |= TP_MF_GATE;
}

void tp_gate_prefix(tp_manifest *m, const void *prefix, uint32_t len) {
    if (m->ngate < MAX_PREFIXES && len <= TP_GATE_MAX_PREFIX_LEN) m->gate_prefixes[m->ngate++] = copy(prefix, len);
    m->flags |= TP_MF_GATE;
}

void tp_gate_max_value(tp_manifest *m, uint32_t bytes) {
    m->gate_max_value = bytes;
    m->flags |= TP_MF_GATE;
}

static void put32(tp_out *o, uint32_t v) {
    uint8_t b[4];
    tp_store32(b, v);
    tp_write(o, b, 4);
}

uint32_t tp_manifest_encode(tp_manifest *m) {
    tp_out o = {0, 0};
    uint32_t n = 0;
    for (uint32_t id = 1; id < TP_CMD_COUNT; id++) n += (m->hooks[id] & HOOKED) != 0;
    put32(&o, TP_ABI_VERSION);
    put32(&o, m->flags);
    put32(&o, m->classes);
    put32(&o, m->tick_ms);
    put32(&o, n);
    put32(&o, m->nprefixes);
    for (uint32_t id = 1; id < TP_CMD_COUNT; id++) {
        if (!(m->hooks[id] & HOOKED)) continue;
        uint8_t b[4] = {(uint8_t)id, (uint8_t)(id >> 8), (uint8_t)(m->hooks[id] & 0xff), 0};
        tp_write(&o, b, 4);
    }
    for (uint32_t i = 0; i < m->nprefixes; i++) {
        put32(&o, m->prefixes[i].len);
        tp_write(&o, m->prefixes[i].ptr, m->prefixes[i].len);
    }
    if (m->flags & TP_MF_DENIES) {
        put32(&o, m->denied_classes);
        put32(&o, m->ndenied);
        for (uint32_t i = 0; i < m->ndenied; i++) {
            put32(&o, m->denied[i].len);
            tp_write(&o, m->denied[i].ptr, m->denied[i].len);
        }
    }
    if (m->flags & TP_MF_GATE) {
        put32(&o, m->gate_classes);
        put32(&o, m->gate_max_value);
        put32(&o, m->ngate);
        for (uint32_t i = 0; i < m->ngate; i++) {
            put32(&o, m->gate_prefixes[i].len);
            tp_write(&o, m->gate_prefixes[i].ptr, m->gate_prefixes[i].len);
        }
    }
    return o.len;
}
