/* Reading the host's tables: a command's arguments and a rewrite's or an observed command's
 * replies (sdk/ABI.md, "Command table", "Reply table"). Every offset is checked against the
 * table's size before it is used: out of range reads as absent, never out of bounds. */
#include "internal.h"

static int entry(const tp_command *c, uint32_t i, uint32_t *off, uint32_t *lf) {
    if (i >= c->nargs) return 0;
    const uint8_t *e = c->table + TP_LAYOUT_CMD_HEADER + i * TP_LAYOUT_ARG_ENTRY;
    *off = tp_load32(e);
    *lf = tp_load32(e + 4);
    return 1;
}

tp_bytes tp_arg(const tp_command *c, uint32_t i) {
    tp_bytes b = {NULL, 0};
    uint32_t off, lf;
    if (!entry(c, i, &off, &lf)) return b;
    uint32_t len = lf & TP_LAYOUT_LEN_MASK;
    if (lf & TP_LAYOUT_ARG_ELIDED) {
        b.len = len;
        return b;
    }
    if (off > c->size || len > c->size - off) return b;
    b.ptr = c->table + off;
    b.len = len;
    return b;
}

uint32_t tp_arg_len(const tp_command *c, uint32_t i) {
    uint32_t off, lf;
    return entry(c, i, &off, &lf) ? (lf & TP_LAYOUT_LEN_MASK) : 0;
}

int tp_arg_is_key(const tp_command *c, uint32_t i) {
    uint32_t off, lf;
    return entry(c, i, &off, &lf) && (lf & TP_LAYOUT_ARG_KEY) && !(lf & TP_LAYOUT_ARG_ELIDED);
}

tp_bytes tp_first_key(const tp_command *c) {
    for (uint32_t i = 1; i < c->nargs; i++)
        if (tp_arg_is_key(c, i)) return tp_arg(c, i);
    tp_bytes none = {NULL, 0};
    return none;
}

uint32_t tp_max_value_len(const tp_command *c) {
    uint32_t max = 0;
    for (uint32_t i = 1; i < c->nargs; i++) {
        uint32_t off, lf;
        entry(c, i, &off, &lf);
        uint32_t len = lf & TP_LAYOUT_LEN_MASK;
        if (!(lf & TP_LAYOUT_ARG_KEY) && len > max) max = len;
    }
    return max;
}

tp_bytes tp_reply(const tp_replies *r, uint32_t i) {
    tp_bytes b = {NULL, 0};
    if (i >= r->n) return b;
    const uint8_t *e = r->table + TP_LAYOUT_REPLIES_HEADER + i * TP_LAYOUT_ARG_ENTRY;
    uint32_t off = tp_load32(e), len = tp_load32(e + 4);
    if (off > r->size || len > r->size - off) return b;
    b.ptr = r->table + off;
    b.len = len;
    return b;
}

uint32_t tp_reply_size(const tp_replies *r, uint32_t i) {
    if (i >= r->n) return 0;
    if (!(r->flags & TP_LAYOUT_REPLIES_HEADS)) return tp_reply(r, i).len;
    uint32_t sizes = TP_LAYOUT_REPLIES_HEADER + r->n * TP_LAYOUT_ARG_ENTRY;
    return tp_load32(r->table + sizes + i * 4);
}

static uint8_t upper(uint8_t c) { return (c >= 'a' && c <= 'z') ? (uint8_t)(c - 32) : c; }

int tp_bytes_eq(tp_bytes b, const void *s, uint32_t len) {
    return b.ptr && b.len == len && __builtin_memcmp(b.ptr, s, len) == 0;
}

int tp_bytes_eq_nocase(tp_bytes b, const char *s) {
    if (!b.ptr) return 0;
    uint32_t i = 0;
    for (; i < b.len; i++)
        if (!s[i] || upper(b.ptr[i]) != upper((uint8_t)s[i])) return 0;
    return s[i] == 0;
}

/* Byte order of the upper-cased name against a table entry (the table is sorted by bytes). */
static int cmp_name(const uint8_t *name, uint32_t len, const char *entry) {
    for (uint32_t i = 0; i < len; i++) {
        uint8_t a = upper(name[i]), b = (uint8_t)entry[i];
        if (b == 0 || a > b) return 1;
        if (a < b) return -1;
    }
    return entry[len] == 0 ? 0 : -1;
}

uint16_t tp_command_id(const char *name, uint32_t len) {
    uint32_t top = 0;
    while (top < len && name[top] != '|') top++;
    if (top == 0) return 0;
    uint32_t lo = 1, hi = TP_CMD_COUNT;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = cmp_name((const uint8_t *)name, top, TP_COMMAND_NAMES[mid]);
        if (c == 0) return (uint16_t)mid;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return 0;
}

uint32_t tp_class_by_name(const char *name, uint32_t len) {
    tp_bytes b = {(const uint8_t *)name, len};
    for (uint32_t i = 0; i < TP_CLASS_COUNT; i++)
        if (tp_bytes_eq_nocase(b, TP_CLASS_NAMES[i].name)) return TP_CLASS_NAMES[i].bit;
    return 0;
}
