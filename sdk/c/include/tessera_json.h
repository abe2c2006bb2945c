/* A small JSON reader for plugin configs (sdk/c/src/json.c): no allocation, values are spans
 * of the config text, read on demand. Enough for configs of strings, numbers, booleans,
 * arrays and objects; not a validator of every JSON corner. */
#ifndef TESSERA_JSON_H
#define TESSERA_JSON_H

#include <stdint.h>

/* A JSON value: its text. */
typedef struct {
    const uint8_t *p;
    uint32_t n;
} tp_json;

/* The value that is the whole text (surrounding spaces ignored); type 0 if it is not one. */
tp_json tp_json_parse(const uint8_t *text, uint32_t len);
/* '{', '[', '"', 'n' (number), 't', 'f', 'z' (null), or 0 for a malformed value. */
char tp_json_type(tp_json v);

/* Iterates an object's members / an array's elements: start with *at = 0; returns 0 at the
 * end (or on malformed input: check tp_json_type of what you got). */
int tp_json_member(tp_json obj, uint32_t *at, tp_json *key, tp_json *val);
int tp_json_element(tp_json arr, uint32_t *at, tp_json *val);
/* The member named `name` (first one), or a value of type 0. */
tp_json tp_json_get(tp_json obj, const char *name);

/* Decodes a string (escapes \" \\ \/ \n \t \r \b \f \uXXXX into UTF-8) into dst; returns its
 * length, or -1 if not a string or dst is too small. */
int32_t tp_json_string(tp_json v, char *dst, uint32_t cap);
/* Whether the string equals `s` (decoded). */
int tp_json_string_is(tp_json v, const char *s);
/* A number (integer and fraction digits exact up to 2^53, exponent), 0 if not a number. */
int tp_json_number(tp_json v, double *out);
/* 1 true, 0 false, -1 not a boolean. */
int tp_json_bool(tp_json v);

#endif
