/* Writing answers into the arena's out buffer: deny texts, RESP replies, observe contexts and
 * rewrite blocks (sdk/ABI.md, "Results", "Rewrite block"). A tp_out is a window of out, so
 * the batch export can give each command of a batch its own window without a copy. */
#include "internal.h"

void tp_write(tp_out *o, const void *bytes, uint32_t len) {
    if (!tp_out_reserve(o->start + o->len + len)) __builtin_trap();
    __builtin_memcpy(tp_outbuf + o->start + o->len, bytes, len);
    o->len += len;
}

void tp_write_str(tp_out *o, const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    tp_write(o, s, n);
}

void tp_write_u64(tp_out *o, uint64_t v) {
    char buf[20];
    uint32_t n = 0;
    do {
        buf[19 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    tp_write(o, buf + 20 - n, n);
}

tp_action tp_deny_written(tp_out *o) { return tp_pack(TP_ACTION_DENY, 0, o->len); }

tp_action tp_deny(tp_out *o, const char *text) {
    o->len = 0;
    tp_write_str(o, text);
    return tp_deny_written(o);
}

tp_action tp_reply_raw(tp_out *o, const void *resp, uint32_t len) {
    o->len = 0;
    tp_write(o, resp, len);
    return tp_pack(TP_ACTION_REPLY, 0, o->len);
}

tp_action tp_observe(tp_out *o, uint64_t ctx) {
    uint8_t b[8];
    tp_store64(b, ctx);
    o->len = 0;
    tp_write(o, b, 8);
    return tp_pack(TP_ACTION_OBSERVE, 0, 8);
}

static void write32(tp_out *o, uint32_t v) {
    uint8_t b[4];
    tp_store32(b, v);
    tp_write(o, b, 4);
}

void tp_rewrite_begin(tp_out *o, uint32_t merge, uint64_t ctx) {
    uint8_t b[8];
    o->len = 0;
    write32(o, merge);
    write32(o, 0);
    tp_store64(b, ctx);
    tp_write(o, b, 8);
}

void tp_rewrite_command(tp_out *o, uint32_t nargs) { write32(o, nargs); }

void tp_rewrite_arg(tp_out *o, const void *bytes, uint32_t len) {
    write32(o, len);
    tp_write(o, bytes, len);
}

void tp_rewrite_input(tp_out *o, uint32_t i) { write32(o, TP_LAYOUT_ARG_REF | i); }

tp_action tp_rewrite_end(tp_out *o, uint32_t count) { return tp_pack(TP_ACTION_REWRITE, count, o->len); }

tp_action tp_replace(tp_out *o, const void *resp, uint32_t len) {
    o->len = 0;
    tp_write(o, resp, len);
    return tp_pack(TP_REPLY_ACTION_REPLACE, 0, o->len);
}

tp_action tp_reply_error(tp_out *o, const char *text) {
    o->len = 0;
    tp_write_str(o, text);
    return tp_pack(TP_REPLY_ACTION_ERROR, 0, o->len);
}
