/* The metrics plugin in C (the core of plugins/metrics, same metric names, labels and config
 * keys): counts commands and error replies and records latency by command and tenant (the
 * first key up to a delimiter), blocking commands' waits apart. The `client` label is `all`:
 * labelling by client name (client_names: true) is not in this port. */
#include "tessera.h"
#include "tessera_json.h"

#define BLOCKED (1ull << 63)
#define NONE 0
#define OTHER 1
#define MAX_BUCKETS 64

/* The series of one (command, tenant). */
typedef struct {
    int32_t count, errors, duration, blocked;
} slot;

static char delim[64];
static uint32_t delim_len = 1;
static uint32_t max_tenants = 100;
static int32_t m_commands, m_errors, m_duration, m_blocked;

/* Tenant label values: index 0 "none", 1 "other", then as first seen; an open-addressing
 * index over them (hash of the bytes → value index + 1). */
static tp_bytes *tenants;
static uint32_t ntenants;
static uint16_t *tenant_index;
static uint32_t tenant_slots;

/* (command id << 16 | tenant) → slot index + 1, open addressing, grown at half full. */
static uint32_t *slot_keys, *slot_vals, slot_cap, slot_used;
static slot *slots;
static uint32_t nslots, slots_cap;

static uint32_t hash(const uint8_t *p, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static uint16_t tenant(tp_bytes v) {
    uint32_t mask = tenant_slots - 1;
    for (uint32_t i = hash(v.ptr, v.len) & mask;; i = (i + 1) & mask) {
        uint16_t t = tenant_index[i];
        if (t == 0) break;
        if (tp_bytes_eq(tenants[t - 1], v.ptr, v.len)) return (uint16_t)(t - 1);
    }
    if (ntenants - 2 >= max_tenants) return OTHER;
    uint8_t *copy = tp_alloc(v.len + 1);
    if (!copy) return OTHER;
    __builtin_memcpy(copy, v.ptr, v.len);
    tenants[ntenants].ptr = copy;
    tenants[ntenants].len = v.len;
    for (uint32_t i = hash(v.ptr, v.len) & mask;; i = (i + 1) & mask)
        if (tenant_index[i] == 0) {
            tenant_index[i] = (uint16_t)(ntenants + 1);
            break;
        }
    return (uint16_t)ntenants++;
}

static const char *const LABELS[] = {"command", "tenant", "client"};

static int define(tp_out *e, double *buckets, uint32_t nb) {
    m_commands = tp_metric_define(TP_METRIC_COUNTER, "commands_total", "Commands by command, tenant and client", LABELS, 3, 0, 0);
    m_errors = tp_metric_define(TP_METRIC_COUNTER, "command_errors_total", "Error replies by command, tenant and client", LABELS, 3, 0, 0);
    m_duration = tp_metric_define(TP_METRIC_HISTOGRAM, "command_duration_seconds",
        "Time from the plugin seeing a command to its reply, by command and tenant", LABELS, 2, buckets, nb);
    m_blocked = tp_metric_define(TP_METRIC_HISTOGRAM, "command_blocked_seconds",
        "Time a blocking command (BLPOP, XREAD BLOCK, WAIT …) waited for its reply, by command and tenant", LABELS, 2, buckets, nb);
    if (m_commands < 0 || m_errors < 0 || m_duration < 0 || m_blocked < 0)
        return tp_write_str(e, "metrics: the host refused a metric definition"), 1;
    return 0;
}

int tp_plugin_init(const uint8_t *config, uint32_t len, tp_manifest *m, tp_out *e) {
    static double buckets[MAX_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
    uint32_t nb = 13, at = 0;
    delim[0] = ':';
    tp_json cfg = tp_json_parse(config, len), k, v;
    if (len && tp_json_type(cfg) != '{') return tp_write_str(e, "metrics: bad config: not a JSON object"), 1;
    while (tp_json_member(cfg, &at, &k, &v)) {
        double d;
        if (tp_json_string_is(k, "tenant_delimiter")) {
            int32_t n = tp_json_string(v, delim, sizeof delim);
            if (n <= 0) return tp_write_str(e, "metrics: tenant_delimiter must not be empty"), 1;
            delim_len = (uint32_t)n;
        } else if (tp_json_string_is(k, "max_tenants")) {
            if (!tp_json_number(v, &d) || d < 0 || d > 60000) return tp_write_str(e, "metrics: bad max_tenants"), 1;
            max_tenants = (uint32_t)d;
        } else if (tp_json_string_is(k, "client_names")) {
            if (tp_json_bool(v) != 0) return tp_write_str(e, "metrics: client_names is not supported by the C port: set it to false"), 1;
        } else if (tp_json_string_is(k, "max_clients")) {
            if (!tp_json_number(v, &d)) return tp_write_str(e, "metrics: bad max_clients"), 1;
        } else if (tp_json_string_is(k, "latency_buckets")) {
            uint32_t a = 0;
            tp_json b;
            nb = 0;
            while (tp_json_element(v, &a, &b)) {
                if (nb == MAX_BUCKETS || !tp_json_number(b, &buckets[nb])) return tp_write_str(e, "metrics: bad latency_buckets"), 1;
                if (nb > 0 && buckets[nb] <= buckets[nb - 1]) return tp_write_str(e, "metrics: latency_buckets must increase"), 1;
                nb++;
            }
        } else {
            tp_write_str(e, "metrics: unknown config key ");
            tp_write(e, k.p, k.n);
            return 1;
        }
    }
    if (define(e, buckets, nb)) return 1;
    tenants = tp_alloc((max_tenants + 2) * sizeof *tenants);
    for (tenant_slots = 16; tenant_slots < 2 * (max_tenants + 2);) tenant_slots *= 2;
    tenant_index = tp_alloc(tenant_slots * sizeof *tenant_index);
    if (!tenants || !tenant_index) return tp_write_str(e, "metrics: out of memory"), 1;
    tenants[0].ptr = (const uint8_t *)"none", tenants[0].len = 4;
    tenants[1].ptr = (const uint8_t *)"other", tenants[1].len = 5;
    ntenants = 2;
    /* XREAD and XREADGROUP block only with BLOCK: their arguments are read. */
    tp_hook_all(m);
    tp_hook_values(m, TP_CMD_XREAD);
    tp_hook_values(m, TP_CMD_XREADGROUP);
    tp_observe_heads(m);
    return 0;
}

/* The slot of (id, tenant), its series resolved on first use. */
static uint32_t slot_of(uint16_t id, uint16_t t) {
    uint32_t key = (uint32_t)id << 16 | t;
    if (slot_used * 2 >= slot_cap) {
        uint32_t cap = slot_cap ? slot_cap * 2 : 256, *keys = tp_alloc(cap * 4), *vals = tp_alloc(cap * 4);
        if (!keys || !vals) __builtin_trap();
        for (uint32_t i = 0; i < slot_cap; i++) {
            if (!slot_vals[i]) continue;
            uint32_t j = (slot_keys[i] * 2654435761u) & (cap - 1);
            while (vals[j]) j = (j + 1) & (cap - 1);
            keys[j] = slot_keys[i], vals[j] = slot_vals[i];
        }
        slot_keys = keys, slot_vals = vals, slot_cap = cap;
    }
    uint32_t i = (key * 2654435761u) & (slot_cap - 1);
    for (; slot_vals[i]; i = (i + 1) & (slot_cap - 1))
        if (slot_keys[i] == key) return slot_vals[i] - 1;
    if (nslots == slots_cap) {
        uint32_t cap = slots_cap ? slots_cap * 2 : 64;
        slot *s = tp_alloc(cap * sizeof *s);
        if (!s) __builtin_trap();
        if (nslots) __builtin_memcpy(s, slots, nslots * sizeof *s);
        slots = s, slots_cap = cap;
    }
    char name[40];
    uint32_t n = 0;
    const char *src = id ? TP_COMMAND_NAMES[id] : "unknown";
    for (; src[n] && n < sizeof name; n++) name[n] = (src[n] >= 'A' && src[n] <= 'Z') ? (char)(src[n] + 32) : src[n];
    const char *values[3] = {name, (const char *)tenants[t].ptr, "all"};
    uint32_t lens[3] = {n, tenants[t].len, 3};
    slot *s = &slots[nslots];
    s->count = tp_series(m_commands, values, lens, 3);
    s->errors = tp_series(m_errors, values, lens, 3);
    s->duration = tp_series(m_duration, values, lens, 2);
    s->blocked = tp_series(m_blocked, values, lens, 2);
    slot_keys[i] = key, slot_vals[i] = ++nslots;
    slot_used++;
    return nslots - 1;
}

/* A command that waits for something: the blocking class, WAIT, XREAD(GROUP) with BLOCK. */
static int blocks(const tp_command *c) {
    if (c->id == TP_CMD_XREAD || c->id == TP_CMD_XREADGROUP) {
        for (uint32_t i = 1; i < c->nargs; i++) {
            tp_bytes a = tp_arg(c, i);
            if (!a.ptr || tp_bytes_eq_nocase(a, "STREAMS")) return 0;
            if (tp_bytes_eq_nocase(a, "BLOCK")) return 1;
        }
        return 0;
    }
    return tp_has_class(c, TP_CLASS_BLOCKING) || c->id == TP_CMD_WAIT;
}

tp_action tp_plugin_on_command(tp_conn conn, const tp_command *c, tp_out *out) {
    (void)conn;
    uint64_t start = (uint64_t)tp_stage_us();
    uint16_t t = NONE;
    tp_bytes key = tp_first_key(c);
    for (uint32_t i = 0; key.ptr && i + delim_len <= key.len; i++) {
        if (__builtin_memcmp(key.ptr + i, delim, delim_len) == 0) {
            tp_bytes head = {key.ptr, i};
            t = tenant(head);
            break;
        }
    }
    uint64_t s = slot_of(c->id, t);
    return tp_observe(out, (blocks(c) ? BLOCKED : 0) | s << 32 | (uint32_t)start);
}

tp_action tp_plugin_on_reply(tp_conn conn, uint64_t ctx, const tp_replies *r, tp_out *out) {
    (void)conn, (void)out;
    uint64_t i = (ctx & ~BLOCKED) >> 32;
    if (i >= nslots) return TP_PASS;
    /* Microseconds modulo 2^32 (71 minutes): fine for a command's latency. */
    uint32_t elapsed = (uint32_t)tp_stage_us() - (uint32_t)ctx;
    slot *s = &slots[i];
    tp_counter_add(s->count, 1);
    tp_histogram_observe(ctx & BLOCKED ? s->blocked : s->duration, (double)elapsed / 1e6);
    tp_bytes head = tp_reply(r, 0);
    if (head.ptr && head.len && head.ptr[0] == '-') tp_counter_add(s->errors, 1);
    return TP_PASS;
}
