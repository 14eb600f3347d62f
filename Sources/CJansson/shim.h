#ifndef CJANSSON_SHIM_H
#define CJANSSON_SHIM_H

#include <jansson.h>

/* json_decref and json_incref are static inline in jansson.h; json_is_* and friends are macros Swift cannot see. */

static inline void cjansson_decref(json_t *json) { json_decref(json); }
static inline json_t *cjansson_incref(json_t *json) { return json_incref(json); }
static inline json_type cjansson_typeof(const json_t *json) { return json_typeof(json); }

/* Parsing flags: duplicate keys are an error, any value at the top is accepted (the caller checks the type). */
static inline size_t cjansson_parse_flags(void) {
    return JSON_REJECT_DUPLICATES | JSON_DECODE_ANY;
}

#endif
