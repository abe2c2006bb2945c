/* The filter plugin in C (the core of plugins/filter, same config keys and error texts):
 * denies commands by name, subcommand or class, refuses writes to read-only keys and values
 * over a size. Client rules (allow_addrs, allow_users, rate_limit) are not in this port. */
#include "tessera.h"
#include "tessera_json.h"

#define MAX_SUBS 64
#define MAX_GLOBS 64
#define TEXT_CAP 256

typedef struct {
    uint16_t id;
    char sub[64];
    uint32_t len;
} sub_rule;

static uint8_t deny_ids[TP_CMD_COUNT];
static sub_rule subs[MAX_SUBS];
static uint32_t nsubs, deny_classes;
static tp_bytes globs[MAX_GLOBS];
static uint32_t nglobs;
static uint64_t max_value; /* 0: no limit */
static char t_denied[TEXT_CAP], t_read_only[TEXT_CAP], t_too_large[TEXT_CAP];

static int starts(const char *p, const char *s) {
    while (*s)
        if (*p++ != *s++) return 0;
    return 1;
}

static uint32_t length(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

/* `*` any run of bytes, `?` one byte; one backtrack point (the last `*`), never exponential. */
static int glob_match(tp_bytes g, tp_bytes s) {
    uint32_t pi = 0, si = 0, sp = 0, ss = 0;
    int star = 0;
    while (si < s.len) {
        if (pi < g.len && g.ptr[pi] == '*') {
            star = 1, sp = pi, ss = si, pi++;
        } else if (pi < g.len && (g.ptr[pi] == '?' || g.ptr[pi] == s.ptr[si])) {
            pi++, si++;
        } else if (star) {
            pi = sp + 1, si = ++ss;
        } else {
            return 0;
        }
    }
    while (pi < g.len && g.ptr[pi] == '*') pi++;
    return pi == g.len;
}

/* `prefix*` with no other wildcard: the host can select such keys itself. */
static int glob_prefix(tp_bytes g) {
    if (!g.len || g.ptr[g.len - 1] != '*') return 0;
    for (uint32_t i = 0; i + 1 < g.len; i++)
        if (g.ptr[i] == '*' || g.ptr[i] == '?') return 0;
    return 1;
}

static int err(tp_out *e, const char *a, tp_json v) {
    tp_write_str(e, a);
    tp_write(e, v.p, v.n);
    return 1;
}

/* The text of a message: custom or default; one that does not start with an upper-case code
 * gets "ERR " in front (as in plugins/filter). */
static int set_text(char *dst, tp_json custom, const char *def) {
    char buf[TEXT_CAP];
    int32_t n = tp_json_type(custom) ? tp_json_string(custom, buf, TEXT_CAP - 5) : -1;
    if (n < 0) {
        if (tp_json_type(custom)) return 0;
        for (n = 0; def[n]; n++) buf[n] = def[n];
    }
    int32_t w = 0;
    while (w < n && buf[w] != ' ') w++;
    int code = w > 0;
    for (int32_t i = 0; i < w; i++) code &= buf[i] >= 'A' && buf[i] <= 'Z';
    int32_t o = 0;
    if (!code) {
        for (const char *p = "ERR "; *p; p++) dst[o++] = *p;
    }
    for (int32_t i = 0; i < n; i++) dst[o++] = buf[i];
    dst[o] = 0;
    return 1;
}

static int parse_commands(tp_json list, tp_out *e) {
    uint32_t at = 0;
    tp_json v;
    while (tp_json_element(list, &at, &v)) {
        char s[160];
        int32_t n = tp_json_string(v, s, sizeof s);
        if (n < 0) return err(e, "filter: bad command ", v);
        int32_t w = 0;
        while (w < n && s[w] != ' ' && s[w] != '|') w++;
        uint16_t id = tp_command_id(s, (uint32_t)w);
        if (!id) return err(e, "filter: unknown command ", v);
        int32_t sub = w;
        while (sub < n && (s[sub] == ' ' || s[sub] == '|')) sub++;
        if (sub == n) {
            deny_ids[id] = 1;
            continue;
        }
        for (int32_t i = sub; i < n; i++)
            if (s[i] == ' ' || s[i] == '|') return err(e, "filter: bad command ", v);
        if (nsubs == MAX_SUBS || n - sub > 63) return err(e, "filter: too many subcommands at ", v);
        sub_rule *r = &subs[nsubs++];
        r->id = id;
        for (int32_t i = sub; i < n; i++) r->sub[r->len++] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 32) : s[i];
    }
    return 0;
}

int tp_plugin_init(const uint8_t *config, uint32_t len, tp_manifest *m, tp_out *e) {
    tp_json cfg = tp_json_parse(config, len), k, v, messages = {config, 0};
    uint32_t at = 0;
    int empty = 1;
    for (uint32_t i = 0; i < len; i++) empty &= config[i] == ' ' || config[i] == '\n' || config[i] == '\t' || config[i] == '\r';
    if (!empty && tp_json_type(cfg) != '{') return tp_write_str(e, "filter: bad config: not a JSON object"), 1;
    while (tp_json_member(cfg, &at, &k, &v)) {
        if (tp_json_string_is(k, "deny_commands")) {
            if (parse_commands(v, e)) return 1;
        } else if (tp_json_string_is(k, "deny_classes")) {
            uint32_t a = 0;
            tp_json c;
            while (tp_json_element(v, &a, &c)) {
                char s[32];
                int32_t n = tp_json_string(c, s, sizeof s);
                uint32_t bit = n < 0 ? 0 : tp_class_by_name(s, (uint32_t)n);
                if (!bit) return err(e, "filter: unknown class ", c);
                deny_classes |= bit;
            }
        } else if (tp_json_string_is(k, "read_only_keys")) {
            uint32_t a = 0;
            tp_json g;
            while (tp_json_element(v, &a, &g) && nglobs < MAX_GLOBS) {
                char *s = tp_alloc(g.n);
                int32_t n = tp_json_string(g, s, g.n);
                if (n <= 0) return err(e, "filter: empty key pattern ", g);
                globs[nglobs].ptr = (const uint8_t *)s;
                globs[nglobs++].len = (uint32_t)n;
            }
        } else if (tp_json_string_is(k, "max_value_bytes")) {
            double d;
            if (!tp_json_number(v, &d) || d < 1) return tp_write_str(e, "filter: max_value_bytes must be at least 1"), 1;
            max_value = (uint64_t)d;
        } else if (tp_json_string_is(k, "messages")) {
            messages = v;
        } else {
            return err(e, "filter: unknown config key (not in the C port) ", k);
        }
    }
    if (!set_text(t_denied, tp_json_get(messages, "denied"), "ERR command '{command}' is not allowed") ||
        !set_text(t_read_only, tp_json_get(messages, "read_only"), "ERR key '{key}' is read-only") ||
        !set_text(t_too_large, tp_json_get(messages, "too_large"), "ERR value is larger than {max} bytes"))
        return tp_write_str(e, "filter: messages must be strings"), 1;

    /* Hook only what the rules need, and declare what every client is refused. */
    for (uint32_t id = 1; id < TP_CMD_COUNT; id++) {
        if (!deny_ids[id]) continue;
        tp_hook(m, (uint16_t)id);
        tp_deny_to_all(m, TP_COMMAND_NAMES[id], length(TP_COMMAND_NAMES[id]));
    }
    for (uint32_t i = 0; i < nsubs; i++) {
        char name[160];
        uint32_t n = 0;
        for (const char *p = TP_COMMAND_NAMES[subs[i].id]; *p; p++) name[n++] = *p;
        name[n++] = '|';
        for (uint32_t j = 0; j < subs[i].len; j++) name[n++] = subs[i].sub[j];
        tp_hook_values(m, subs[i].id);
        tp_deny_to_all(m, name, n);
    }
    tp_hook_class(m, deny_classes);
    tp_deny_classes_to_all(m, deny_classes);
    if (nglobs || max_value) {
        /* Read-only `prefix*` patterns and the value bound are checked by the host (the
         * gate): a write no rule touches never enters the plugin. */
        int gate = !(deny_classes & TP_CLASS_WRITE);
        tp_hook_class(m, TP_CLASS_WRITE);
        for (uint32_t i = 0; i < nglobs; i++) gate &= glob_prefix(globs[i]);
        if (gate) {
            tp_gate_classes(m, TP_CLASS_WRITE);
            for (uint32_t i = 0; i < nglobs; i++) tp_gate_prefix(m, globs[i].ptr, globs[i].len - 1);
            if (max_value) tp_gate_max_value(m, max_value >= 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)max_value);
        }
    }
    return 0;
}

/* A message with {command} (upper-cased), {key} and {max} filled in. */
static tp_action deny(tp_out *o, const char *t, const tp_command *c, tp_bytes key) {
    o->len = 0;
    tp_bytes name = tp_arg(c, 0);
    for (const char *p = t; *p;) {
        if (starts(p, "{command}")) {
            for (uint32_t i = 0; i < name.len; i++) {
                uint8_t ch = name.ptr[i];
                ch = (ch >= 'a' && ch <= 'z') ? (uint8_t)(ch - 32) : ch;
                tp_write(o, &ch, 1);
            }
            p += 9;
        } else if (starts(p, "{key}")) {
            tp_write(o, key.ptr, key.len);
            p += 5;
        } else if (starts(p, "{max}")) {
            tp_write_u64(o, max_value);
            p += 5;
        } else {
            tp_write(o, p++, 1);
        }
    }
    return tp_deny_written(o);
}

tp_action tp_plugin_on_command(tp_conn conn, const tp_command *c, tp_out *out) {
    (void)conn;
    tp_bytes none = {0, 0};
    int sub_denied = 0;
    for (uint32_t i = 0; i < nsubs && !sub_denied; i++) {
        tp_bytes a = tp_arg(c, 1);
        if (subs[i].id != c->id || !a.ptr || a.len != subs[i].len) continue;
        sub_denied = 1;
        for (uint32_t j = 0; j < a.len; j++) {
            uint8_t ch = a.ptr[j];
            if (((ch >= 'a' && ch <= 'z') ? ch - 32 : ch) != (uint8_t)subs[i].sub[j]) sub_denied = 0;
        }
    }
    if ((c->id < TP_CMD_COUNT && deny_ids[c->id]) || tp_has_class(c, deny_classes) || sub_denied)
        return deny(out, t_denied, c, none);
    if (tp_has_class(c, TP_CLASS_WRITE)) {
        for (uint32_t i = 1; i < c->nargs; i++) {
            if (!tp_arg_is_key(c, i)) continue;
            tp_bytes k = tp_arg(c, i);
            for (uint32_t g = 0; g < nglobs; g++)
                if (glob_match(globs[g], k)) return deny(out, t_read_only, c, k);
        }
        if (max_value && tp_max_value_len(c) > max_value) return deny(out, t_too_large, c, none);
    }
    return TP_PASS;
}
