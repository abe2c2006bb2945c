/* The host functions (sdk/ABI.md, "Imports", module "tessera") and thin wrappers: string
 * lists encoded for metric definitions and series, negative series ignored. */
#include "internal.h"

#define IMPORT(name) __attribute__((import_module("tessera"), import_name(name)))

IMPORT("log") void host_log(int32_t level, const void *p, int32_t len);
IMPORT("log_enabled") int32_t host_log_enabled(int32_t level);
IMPORT("metric_define") int64_t host_metric_define(int32_t kind, const void *name, int32_t name_len,
    const void *help, int32_t help_len, const void *labels, int32_t labels_len, const void *buckets, int32_t nbuckets);
IMPORT("metric_series") int64_t host_metric_series(int32_t metric, const void *values, int32_t len);
IMPORT("counter_add") void host_counter_add(int32_t series, int64_t delta);
IMPORT("gauge_set") void host_gauge_set(int32_t series, int64_t v);
IMPORT("gauge_add") void host_gauge_add(int32_t series, int64_t v);
IMPORT("histogram_observe") void host_histogram_observe(int32_t series, double v);
IMPORT("state_get") int64_t host_state_get(const void *k, int32_t kl, void *dst, int32_t cap);
IMPORT("state_set") int32_t host_state_set(const void *k, int32_t kl, const void *v, int32_t vl, int64_t ttl);
IMPORT("state_delete") int32_t host_state_delete(const void *k, int32_t kl);
IMPORT("state_incr") int64_t host_state_incr(const void *k, int32_t kl, int64_t d, int64_t ttl);
IMPORT("ratelimit_acquire") int32_t host_ratelimit(const void *b, int32_t bl, int32_t cost, int32_t ps, int32_t burst);
IMPORT("client_info") int32_t host_client_info(int64_t conn, void *dst, int32_t cap);
IMPORT("now_ms") int64_t host_now_ms(void);
IMPORT("now_us") int64_t host_now_us(void);
IMPORT("stage_us") int64_t host_stage_us(void);

void tp_log(int32_t level, const char *msg, uint32_t len) { host_log(level, msg, (int32_t)len); }
int tp_log_enabled(int32_t level) { return host_log_enabled(level) != 0; }

static uint32_t slen(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

/* {u32 len, bytes}* into fresh memory (init-time only, so tp_alloc's cost is fine). */
static uint8_t *string_list(const char *const *s, const uint32_t *lens, uint32_t n, uint32_t *out_len) {
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += 4 + (lens ? lens[i] : slen(s[i]));
    uint8_t *b = tp_alloc(total ? total : 1);
    if (!b) return NULL;
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = lens ? lens[i] : slen(s[i]);
        tp_store32(b + at, l);
        __builtin_memcpy(b + at + 4, s[i], l);
        at += 4 + l;
    }
    *out_len = total;
    return b;
}

int32_t tp_metric_define(int32_t kind, const char *name, const char *help, const char *const *labels,
                         uint32_t nlabels, const double *buckets, uint32_t nbuckets) {
    uint32_t llen = 0;
    uint8_t *l = string_list(labels, NULL, nlabels, &llen);
    if (!l) return (int32_t)TP_STATUS_BAD_ARGUMENT;
    int64_t r = host_metric_define(kind, name, (int32_t)slen(name), help, (int32_t)slen(help), l, (int32_t)llen,
                                   buckets, buckets ? (int32_t)nbuckets : 0);
    return (int32_t)r;
}

int32_t tp_series(int32_t metric, const char *const *values, const uint32_t *lens, uint32_t n) {
    if (metric < 0) return metric;
    uint32_t len = 0;
    uint8_t *b = string_list(values, lens, n, &len);
    if (!b) return (int32_t)TP_STATUS_BAD_ARGUMENT;
    return (int32_t)host_metric_series(metric, b, (int32_t)len);
}

void tp_counter_add(int32_t s, int64_t d) { if (s >= 0) host_counter_add(s, d); }
void tp_gauge_set(int32_t s, int64_t v) { if (s >= 0) host_gauge_set(s, v); }
void tp_gauge_add(int32_t s, int64_t d) { if (s >= 0) host_gauge_add(s, d); }
void tp_histogram_observe(int32_t s, double v) { if (s >= 0) host_histogram_observe(s, v); }

int64_t tp_state_get(const void *k, uint32_t kl, void *dst, uint32_t cap) {
    return host_state_get(k, (int32_t)kl, dst, (int32_t)cap);
}
int32_t tp_state_set(const void *k, uint32_t kl, const void *v, uint32_t vl, int64_t ttl) {
    return host_state_set(k, (int32_t)kl, v, (int32_t)vl, ttl);
}
int32_t tp_state_delete(const void *k, uint32_t kl) { return host_state_delete(k, (int32_t)kl); }
int64_t tp_state_incr(const void *k, uint32_t kl, int64_t d, int64_t ttl) {
    return host_state_incr(k, (int32_t)kl, d, ttl);
}
int tp_ratelimit_acquire(const void *b, uint32_t bl, uint32_t cost, uint32_t ps, uint32_t burst) {
    return host_ratelimit(b, (int32_t)bl, (int32_t)cost, (int32_t)ps, (int32_t)burst) == 1;
}
int32_t tp_client_info(tp_conn conn, void *dst, uint32_t cap) {
    return host_client_info((int64_t)conn, dst, (int32_t)cap);
}
int64_t tp_now_ms(void) { return host_now_ms(); }
int64_t tp_now_us(void) { return host_now_us(); }
int64_t tp_stage_us(void) { return host_stage_us(); }
