/* Tessera plugin SDK for C (ABI v1, sdk/ABI.md): the types a plugin sees, the hooks it
 * implements, the host functions it may call. Build with sdk/c/tessera-cc (Zig's cc,
 * wasm32-freestanding); the SDK's runtime (sdk/c/src) provides every export of the ABI.
 *
 * A plugin defines tp_plugin_init and tp_plugin_on_command, and optionally tp_plugin_on_reply,
 * tp_plugin_on_close and tp_plugin_on_tick (the SDK's weak defaults pass and do nothing).
 * Nothing is allocated on the hot path: a command is a view of the host's table in the arena,
 * and answers are written straight into the output buffer. */
#ifndef TESSERA_H
#define TESSERA_H

#include <stddef.h>
#include <stdint.h>

#include "tessera_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===== Values ============================================================================ */

/* A byte string in guest memory. ptr is NULL when absent (an elided value, an index past the
 * end); len is then the real length of an elided value, 0 otherwise. */
typedef struct {
    const uint8_t *ptr;
    uint32_t len;
} tp_bytes;

/* A hook's answer: the packed i64 of the ABI (action:8 | count:24 | out_len:32). TP_PASS is 0. */
typedef int64_t tp_action;
#define TP_PASS ((tp_action)0)

/* A client connection (the same id in on_command, on_reply and on_close). */
typedef uint64_t tp_conn;

/* ===== Commands (on_command) ============================================================= */

/* One client command: argument 0 is its name as the client sent it. */
typedef struct {
    const uint8_t *table; /* the command table (sdk/ABI.md, "Command table") */
    uint32_t size;        /* its size in bytes */
    uint32_t nargs;
    uint32_t class_bits;  /* TP_CLASS_* */
    uint16_t id;          /* TP_CMD_*, 0 = unknown to the proxy */
} tp_command;

/* Argument i: bytes (ptr NULL when elided: the manifest did not ask for values). */
tp_bytes tp_arg(const tp_command *c, uint32_t i);
/* Argument i's real length, elided or not (0 past the end). */
uint32_t tp_arg_len(const tp_command *c, uint32_t i);
/* Whether argument i is a key. Keys and the name are always present. */
int tp_arg_is_key(const tp_command *c, uint32_t i);
/* Whether the command has any of these TP_CLASS_* bits. */
static inline int tp_has_class(const tp_command *c, uint32_t bits) { return (c->class_bits & bits) != 0; }
/* The first key, or {NULL, 0}. */
tp_bytes tp_first_key(const tp_command *c);
/* The longest argument that is neither the name nor a key (elided or not). */
uint32_t tp_max_value_len(const tp_command *c);

/* ===== Output (answers) ================================================================== */

/* Where a hook writes its answer: a window of the arena's out buffer. */
typedef struct {
    uint32_t start; /* offset of this answer in out */
    uint32_t len;   /* bytes written so far */
} tp_out;

/* Appends bytes to the answer being written (the buffer grows as needed). */
void tp_write(tp_out *o, const void *bytes, uint32_t len);
void tp_write_str(tp_out *o, const char *s);
/* Appends a decimal integer. */
void tp_write_u64(tp_out *o, uint64_t v);

/* on_command answers. Each returns the tp_action to return from the hook. */
/* Reply -<text> to the client (text like "ERR not allowed"). */
tp_action tp_deny(tp_out *o, const char *text);
/* The same, with the text already written with tp_write. */
tp_action tp_deny_written(tp_out *o);
/* Reply with one complete RESP reply (validated by the host). */
tp_action tp_reply_raw(tp_out *o, const void *resp, uint32_t len);
/* Forward unchanged, and call on_reply with its reply and ctx. */
tp_action tp_observe(tp_out *o, uint64_t ctx);

/* Rewrite: replace the command by `count` commands, each routed by its own keys.
 *   tp_rewrite_begin(o, TP_MERGE_SUM, ctx);
 *   tp_rewrite_command(o, 2); tp_rewrite_arg(o, "GET", 3); tp_rewrite_input(o, 1);
 *   return tp_rewrite_end(o, 1); */
void tp_rewrite_begin(tp_out *o, uint32_t merge, uint64_t ctx);
void tp_rewrite_command(tp_out *o, uint32_t nargs);
void tp_rewrite_arg(tp_out *o, const void *bytes, uint32_t len);
/* Reuse the client's argument i as is (even if it was elided). */
void tp_rewrite_input(tp_out *o, uint32_t i);
tp_action tp_rewrite_end(tp_out *o, uint32_t count);

/* ===== Replies (on_reply) ================================================================ */

/* The replies of an observed command (one) or of a rewrite with TP_MERGE_PLUGIN (in order). */
typedef struct {
    const uint8_t *table;
    uint32_t size;
    uint32_t n;
    uint32_t flags; /* TP_LAYOUT_REPLIES_HEADS: each entry is the reply's head */
} tp_replies;

/* Reply i's bytes as the table holds them (whole, or its head: first line, <= 64 bytes). */
tp_bytes tp_reply(const tp_replies *r, uint32_t i);
/* Reply i's full size in bytes. */
uint32_t tp_reply_size(const tp_replies *r, uint32_t i);

/* on_reply answers: TP_PASS (one reply), or: */
tp_action tp_replace(tp_out *o, const void *resp, uint32_t len);
tp_action tp_reply_error(tp_out *o, const char *text);

/* ===== The manifest (init) =============================================================== */

typedef struct tp_manifest tp_manifest;

/* Hook one command (names and keys only), or with the bytes of every argument. */
void tp_hook(tp_manifest *m, uint16_t id);
void tp_hook_values(tp_manifest *m, uint16_t id);
/* Hook every command of these classes; every command. */
void tp_hook_class(tp_manifest *m, uint32_t bits);
void tp_hook_all(tp_manifest *m);
/* Copy values for commands hooked by class or by tp_hook_all. */
void tp_class_values(tp_manifest *m);
/* Only commands with a key under one of the prefixes reach the plugin. */
void tp_prefix(tp_manifest *m, const void *prefix, uint32_t len);
void tp_want_close(tp_manifest *m);
void tp_observe_heads(tp_manifest *m);
void tp_tick_ms(tp_manifest *m, uint32_t ms);
/* Declare what the plugin refuses to every client ("FLUSHALL", "CONFIG|SET"; classes):
 * only unconditional rules (sdk/ABI.md, "Manifest"). */
void tp_deny_to_all(tp_manifest *m, const char *name, uint32_t len);
void tp_deny_classes_to_all(tp_manifest *m, uint32_t bits);
/* The gate (sdk/ABI.md, "Manifest"): a command hooked only through these classes reaches the
 * plugin only when a key is under a gate prefix or a value is longer than the bound. */
void tp_gate_classes(tp_manifest *m, uint32_t bits);
void tp_gate_prefix(tp_manifest *m, const void *prefix, uint32_t len);
void tp_gate_max_value(tp_manifest *m, uint32_t bytes);

/* ===== Hooks the plugin defines ========================================================== */

/* Called once per instance with the config bytes (JSON by convention). Fill the manifest and
 * return 0, or write a message for the operator to err and return non-zero. */
int tp_plugin_init(const uint8_t *config, uint32_t len, tp_manifest *m, tp_out *err);
/* Hot path: only for the commands the manifest selects. */
tp_action tp_plugin_on_command(tp_conn conn, const tp_command *c, tp_out *out);
/* Optional (the default passes). */
tp_action tp_plugin_on_reply(tp_conn conn, uint64_t ctx, const tp_replies *r, tp_out *out);
void tp_plugin_on_close(tp_conn conn);
void tp_plugin_on_tick(void);

/* ===== Host functions ==================================================================== */

void tp_log(int32_t level, const char *msg, uint32_t len);
int tp_log_enabled(int32_t level);

/* Metrics, defined in init (exported as tessera_plugin_<plugin>_<name>). Return an id >= 0,
 * or a TP_STATUS_* code. buckets may be NULL (the host's defaults). */
int32_t tp_metric_define(int32_t kind, const char *name, const char *help,
                         const char *const *labels, uint32_t nlabels,
                         const double *buckets, uint32_t nbuckets);
/* The series of these label values (one per label), resolved once: >= 0, or a status. */
int32_t tp_series(int32_t metric, const char *const *values, const uint32_t *lens, uint32_t n);
/* Updates; a negative series (a failed definition) is ignored. */
void tp_counter_add(int32_t series, int64_t delta);
void tp_gauge_set(int32_t series, int64_t value);
void tp_gauge_add(int32_t series, int64_t delta);
void tp_histogram_observe(int32_t series, double value);

/* Shared state (one namespace per plugin, all workers). */
int64_t tp_state_get(const void *key, uint32_t klen, void *dst, uint32_t cap);
int32_t tp_state_set(const void *key, uint32_t klen, const void *val, uint32_t vlen, int64_t ttl_ms);
int32_t tp_state_delete(const void *key, uint32_t klen);
int64_t tp_state_incr(const void *key, uint32_t klen, int64_t delta, int64_t ttl_ms);
int tp_ratelimit_acquire(const void *bucket, uint32_t len, uint32_t cost, uint32_t per_second, uint32_t burst);
/* Client facts, serialized as sdk/ABI.md says; returns the length needed. */
int32_t tp_client_info(tp_conn conn, void *dst, uint32_t cap);

int64_t tp_now_ms(void);
int64_t tp_now_us(void);
int64_t tp_stage_us(void);

/* ===== Memory ============================================================================ */

/* size bytes, 8-aligned, zeroed; NULL past the memory limit. Never freed: allocate in init, or
 * grow geometrically (the SDK's own buffers do). */
void *tp_alloc(uint32_t size);

/* Small helpers. */
int tp_bytes_eq(tp_bytes b, const void *s, uint32_t len);
/* ASCII case-insensitive comparison with a C string. */
int tp_bytes_eq_nocase(tp_bytes b, const char *s);
/* The ABI id of a command name (case-insensitive; "CONFIG|GET" gives CONFIG's), 0 if unknown. */
uint16_t tp_command_id(const char *name, uint32_t len);
/* The bit of a class name as configs spell it ("multi-key"), 0 if unknown. */
uint32_t tp_class_by_name(const char *name, uint32_t len);

#ifdef __cplusplus
}
#endif

#endif
