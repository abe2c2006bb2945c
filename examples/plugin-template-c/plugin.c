/* A minimal Tessera plugin in C to copy: denies one configured command and counts, per
 * command, what it saw. Build: `make`; test without a proxy: `make test`.
 *
 * Config (JSON): {"deny": "FLUSHALL"}; `deny` is optional. */
#include "tessera.h"
#include "tessera_json.h"

static uint16_t deny;                /* the denied command's id, 0 for none */
static int32_t seen;                 /* the metric commands_seen_total{command} */
static int32_t series[TP_CMD_COUNT]; /* its series by command id, resolved on first use */

int tp_plugin_init(const uint8_t *config, uint32_t len, tp_manifest *m, tp_out *err) {
    tp_json cfg = tp_json_parse(config, len);
    if (tp_json_type(cfg) != '{') return tp_write_str(err, "template: bad config: not a JSON object"), 1;
    tp_json name = tp_json_get(cfg, "deny");
    if (tp_json_type(name)) {
        char s[64];
        int32_t n = tp_json_string(name, s, sizeof s);
        deny = n > 0 ? tp_command_id(s, (uint32_t)n) : 0;
        if (!deny) {
            tp_write_str(err, "template: unknown command ");
            tp_write(err, name.p, name.n);
            return 1;
        }
    }
    /* Metrics are defined in init; the proxy exports this one as
     * tessera_plugin_<plugin>_commands_seen_total{command="get"}. */
    static const char *const labels[] = {"command"};
    seen = tp_metric_define(TP_METRIC_COUNTER, "commands_seen_total", "Commands seen", labels, 1, 0, 0);
    if (seen < 0) return tp_write_str(err, "template: metric refused"), 1;
    for (uint32_t i = 0; i < TP_CMD_COUNT; i++) series[i] = -1;
    /* Hook every command (to count them): names and keys only, values are not copied. */
    tp_hook_all(m);
    return 0;
}

/* The series of a command id, resolved once (the hot path is then one host call). */
static int32_t series_of(uint16_t id) {
    if (series[id] >= 0) return series[id];
    char name[40];
    const char *src = id ? TP_COMMAND_NAMES[id] : "unknown";
    uint32_t n = 0;
    for (; src[n] && n < sizeof name; n++) name[n] = (src[n] >= 'A' && src[n] <= 'Z') ? (char)(src[n] + 32) : src[n];
    const char *values[] = {name};
    return series[id] = tp_series(seen, values, &n, 1);
}

tp_action tp_plugin_on_command(tp_conn conn, const tp_command *c, tp_out *out) {
    (void)conn;
    tp_counter_add(series_of(c->id < TP_CMD_COUNT ? c->id : 0), 1);
    if (deny && c->id == deny) {
        tp_write_str(out, "ERR ");
        tp_write_str(out, TP_COMMAND_NAMES[deny]);
        tp_write_str(out, " is disabled by the template plugin");
        return tp_deny_written(out);
    }
    return TP_PASS;
}
