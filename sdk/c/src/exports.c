/* The ABI's exports (sdk/ABI.md, "Exports") and their dispatch to the plugin's hooks:
 * tp_init, tp_on_command, tp_on_commands (a pipeline's commands in one call), tp_on_reply,
 * tp_on_close, tp_on_tick, and the version marker. The arena exports are in arena.c. */
#include "internal.h"

__attribute__((export_name("tessera_plugin_abi_v1"))) void tessera_plugin_abi_v1(void) {}

static int ready;

/* The plugin's optional hooks: pass, do nothing. */
__attribute__((weak)) tp_action tp_plugin_on_reply(tp_conn c, uint64_t x, const tp_replies *r, tp_out *o) {
    (void)c; (void)x; (void)r; (void)o;
    return TP_PASS;
}
__attribute__((weak)) void tp_plugin_on_close(tp_conn c) { (void)c; }
__attribute__((weak)) void tp_plugin_on_tick(void) {}

static tp_action fail(uint32_t action, const char *msg) {
    tp_out o = {0, 0};
    tp_write_str(&o, msg);
    return tp_pack(action, 0, o.len);
}

__attribute__((export_name("tp_init"))) int64_t tp_init(int32_t cfg_len) {
    tp_arena_ensure();
    if (cfg_len < 0 || (uint32_t)cfg_len > tp_in_cap) return fail(TP_INIT_ERROR, "plugin: config length out of range");
    /* The config is copied out of `in`: the plugin may keep pointers into it. */
    uint8_t *cfg = tp_alloc((uint32_t)cfg_len + 1);
    if (!cfg) return fail(TP_INIT_ERROR, "plugin: no memory for the config");
    __builtin_memcpy(cfg, tp_in, (uint32_t)cfg_len);
    tp_manifest *m = tp_manifest_new();
    tp_out err = {0, 0};
    if (tp_plugin_init(cfg, (uint32_t)cfg_len, m, &err) != 0) {
        if (err.len == 0) tp_write_str(&err, "plugin refused its config");
        return tp_pack(TP_INIT_ERROR, 0, err.len);
    }
    ready = 1;
    return tp_pack(TP_INIT_OK, 0, tp_manifest_encode(m));
}

/* A command table at `table` of `size` bytes, checked to hold its header and entries. */
static int view(const uint8_t *table, uint32_t size, uint16_t id, tp_command *c) {
    if (size < TP_LAYOUT_CMD_HEADER) return 0;
    uint32_t nargs = tp_load32(table);
    if (nargs > (size - TP_LAYOUT_CMD_HEADER) / TP_LAYOUT_ARG_ENTRY) return 0;
    c->table = table;
    c->size = size;
    c->nargs = nargs;
    c->class_bits = tp_load32(table + 8);
    c->id = id;
    return 1;
}

__attribute__((export_name("tp_on_command"))) int64_t tp_on_command(int64_t conn, int32_t cmd, int32_t nargs) {
    if (!ready) return fail(TP_ACTION_DENY, "ERR plugin is not initialized");
    tp_command c;
    if (!view(tp_in, tp_in_cap, (uint16_t)cmd, &c) || c.nargs != (uint32_t)nargs)
        return fail(TP_ACTION_DENY, "ERR plugin received a malformed command");
    tp_out o = {0, 0};
    return tp_plugin_on_command((tp_conn)conn, &c, &o);
}

/* A batch (sdk/ABI.md, "Batches"): each command through on_command in order, its result in
 * out's result array and its output right after the earlier ones (its tp_out window starts
 * there), then `done` advanced, so a fault is charged to the command that was running. */
__attribute__((export_name("tp_on_commands"))) int64_t tp_on_commands(int64_t conn, int32_t n) {
    if (!ready || n <= 0) return 0;
    uint32_t count = (uint32_t)n;
    if (tp_in_cap < TP_LAYOUT_BATCH_HEADER || tp_load32(tp_in) != count ||
        count > (tp_in_cap - TP_LAYOUT_BATCH_HEADER) / TP_LAYOUT_BATCH_ENTRY)
        return 0;
    uint32_t used = count * TP_LAYOUT_BATCH_RESULT;
    if (!tp_out_reserve(used)) return 0;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = tp_in + TP_LAYOUT_BATCH_HEADER + i * TP_LAYOUT_BATCH_ENTRY;
        uint32_t off = tp_load32(e), len = tp_load32(e + 4), id = tp_load32(e + 8);
        tp_out o = {used, 0};
        tp_command c;
        tp_action r;
        if (off <= tp_in_cap && len <= tp_in_cap - off && view(tp_in + off, len, (uint16_t)id, &c))
            r = tp_plugin_on_command((tp_conn)conn, &c, &o);
        else
            r = (o.len = 0, tp_write_str(&o, "ERR plugin received a malformed command"), tp_pack(TP_ACTION_DENY, 0, o.len));
        used += (uint32_t)r;
        tp_store64(tp_outbuf + i * TP_LAYOUT_BATCH_RESULT, (uint64_t)r);
        tp_store32(tp_in + TP_LAYOUT_BATCH_DONE, i + 1);
    }
    return tp_pack(0, count, used);
}

__attribute__((export_name("tp_on_reply"))) int64_t tp_on_reply(int64_t conn, int64_t ctx, int32_t n) {
    if (!ready) return fail(TP_REPLY_ACTION_ERROR, "ERR plugin is not initialized");
    tp_replies r = {tp_in, tp_in_cap, tp_in_cap >= 8 ? tp_load32(tp_in) : 0, tp_in_cap >= 8 ? tp_load32(tp_in + 4) : 0};
    uint64_t table = TP_LAYOUT_REPLIES_HEADER + (uint64_t)r.n * (TP_LAYOUT_ARG_ENTRY + 4);
    if (r.n != (uint32_t)n || table > tp_in_cap) return fail(TP_REPLY_ACTION_ERROR, "ERR plugin received malformed replies");
    tp_out o = {0, 0};
    return tp_plugin_on_reply((tp_conn)conn, (uint64_t)ctx, &r, &o);
}

__attribute__((export_name("tp_on_close"))) void tp_on_close(int64_t conn) {
    if (ready) tp_plugin_on_close((tp_conn)conn);
}

__attribute__((export_name("tp_on_tick"))) void tp_on_tick(void) {
    if (ready) tp_plugin_on_tick();
}
