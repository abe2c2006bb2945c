/* The JSON reader of tessera_json.h: values are spans; skipping a value walks its text once. */
#include "tessera_json.h"

static uint32_t ws(const uint8_t *p, uint32_t n, uint32_t i) {
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    return i;
}

/* The end of the value starting at i (after spaces), or 0 if malformed. Depth-limited. */
static uint32_t skip(const uint8_t *p, uint32_t n, uint32_t i, int depth) {
    if (depth > 64 || i >= n) return 0;
    uint8_t c = p[i];
    if (c == '"') {
        for (i++; i < n; i++) {
            if (p[i] == '\\') i++;
            else if (p[i] == '"') return i + 1;
        }
        return 0;
    }
    if (c == '{' || c == '[') {
        uint8_t close = c == '{' ? '}' : ']';
        i = ws(p, n, i + 1);
        if (i < n && p[i] == close) return i + 1;
        for (;;) {
            if (c == '{') {
                uint32_t k = skip(p, n, i, depth + 1);
                if (!k || p[i] != '"') return 0;
                i = ws(p, n, k);
                if (i >= n || p[i] != ':') return 0;
                i = ws(p, n, i + 1);
            }
            uint32_t e = skip(p, n, i, depth + 1);
            if (!e) return 0;
            i = ws(p, n, e);
            if (i >= n) return 0;
            if (p[i] == close) return i + 1;
            if (p[i] != ',') return 0;
            i = ws(p, n, i + 1);
        }
    }
    uint32_t s = i;
    while (i < n && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != ' ' && p[i] != '\n' &&
           p[i] != '\r' && p[i] != '\t')
        i++;
    return i > s ? i : 0;
}

tp_json tp_json_parse(const uint8_t *text, uint32_t len) {
    tp_json v = {text, 0};
    uint32_t s = ws(text, len, 0);
    uint32_t e = skip(text, len, s, 0);
    if (!e || ws(text, len, e) != len) return v;
    v.p = text + s;
    v.n = e - s;
    return v;
}

char tp_json_type(tp_json v) {
    if (!v.n) return 0;
    switch (v.p[0]) {
    case '{': case '[': case '"': return (char)v.p[0];
    case 't': return 't';
    case 'f': return 'f';
    case 'n': return 'z';
    default: return (v.p[0] == '-' || (v.p[0] >= '0' && v.p[0] <= '9')) ? 'n' : 0;
    }
}

static int next(tp_json c, uint32_t *at, tp_json *key, tp_json *val) {
    const uint8_t *p = c.p;
    uint32_t n = c.n, i = *at ? *at : 1;
    i = ws(p, n, i);
    if (i < n && p[i] == ',') i = ws(p, n, i + 1);
    if (i >= n - 1) return 0;
    if (key) {
        uint32_t k = skip(p, n, i, 1);
        if (!k) return 0;
        key->p = p + i;
        key->n = k - i;
        i = ws(p, n, k);
        if (i >= n || p[i] != ':') return 0;
        i = ws(p, n, i + 1);
    }
    uint32_t e = skip(p, n, i, 1);
    if (!e) return 0;
    val->p = p + i;
    val->n = e - i;
    *at = e;
    return 1;
}

int tp_json_member(tp_json obj, uint32_t *at, tp_json *key, tp_json *val) {
    return tp_json_type(obj) == '{' && next(obj, at, key, val);
}

int tp_json_element(tp_json arr, uint32_t *at, tp_json *val) {
    return tp_json_type(arr) == '[' && next(arr, at, 0, val);
}

tp_json tp_json_get(tp_json obj, const char *name) {
    uint32_t at = 0;
    tp_json k, v;
    while (tp_json_member(obj, &at, &k, &v))
        if (tp_json_string_is(k, name)) return v;
    tp_json none = {obj.p, 0};
    return none;
}

static int hex(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int32_t tp_json_string(tp_json v, char *dst, uint32_t cap) {
    if (tp_json_type(v) != '"') return -1;
    uint32_t o = 0;
    for (uint32_t i = 1; i + 1 < v.n; i++) {
        uint32_t c = v.p[i];
        if (c == '\\') {
            c = v.p[++i];
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                if (i + 4 >= v.n) return -1;
                int a = hex(v.p[i + 1]), b = hex(v.p[i + 2]), d = hex(v.p[i + 3]), e = hex(v.p[i + 4]);
                if ((a | b | d | e) < 0) return -1;
                c = (uint32_t)(a << 12 | b << 8 | d << 4 | e);
                i += 4;
                /* UTF-8 (surrogate pairs are not joined: configs are ASCII in practice). */
                if (c >= 0x80) {
                    if (o + 3 > cap) return -1;
                    if (c < 0x800) {
                        dst[o++] = (char)(0xC0 | c >> 6);
                    } else {
                        dst[o++] = (char)(0xE0 | c >> 12);
                        dst[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    }
                    c = 0x80 | (c & 0x3F);
                }
                break;
            }
            default: break; /* \" \\ \/ */
            }
        }
        if (o >= cap) return -1;
        dst[o++] = (char)c;
    }
    return (int32_t)o;
}

int tp_json_string_is(tp_json v, const char *s) {
    char buf[256];
    int32_t n = tp_json_string(v, buf, sizeof buf);
    if (n < 0) return 0;
    for (int32_t i = 0; i < n; i++)
        if (s[i] != buf[i]) return 0;
    return s[n] == 0;
}

int tp_json_number(tp_json v, double *out) {
    if (tp_json_type(v) != 'n') return 0;
    uint32_t i = 0;
    int neg = v.p[0] == '-';
    i += neg;
    uint64_t digits = 0;
    int frac = 0, exp = 0, any = 0;
    for (; i < v.n && v.p[i] >= '0' && v.p[i] <= '9'; i++, any = 1) digits = digits * 10 + (v.p[i] - '0');
    if (i < v.n && v.p[i] == '.')
        for (i++; i < v.n && v.p[i] >= '0' && v.p[i] <= '9'; i++, frac++) digits = digits * 10 + (v.p[i] - '0');
    if (i < v.n && (v.p[i] == 'e' || v.p[i] == 'E')) {
        int eneg = 0;
        i++;
        if (i < v.n && (v.p[i] == '-' || v.p[i] == '+')) eneg = v.p[i++] == '-';
        for (; i < v.n && v.p[i] >= '0' && v.p[i] <= '9'; i++) exp = exp * 10 + (v.p[i] - '0');
        if (eneg) exp = -exp;
    }
    if (!any || i != v.n) return 0;
    /* One division by an exact power of ten: correctly rounded for the usual configs (0.0001). */
    exp -= frac;
    double d = (double)digits, p = 1;
    for (int e = exp < 0 ? -exp : exp; e > 0; e--) p *= 10;
    d = exp < 0 ? d / p : d * p;
    *out = neg ? -d : d;
    return 1;
}

int tp_json_bool(tp_json v) {
    if (v.n == 4 && v.p[0] == 't') return 1;
    if (v.n == 5 && v.p[0] == 'f') return 0;
    return -1;
}
