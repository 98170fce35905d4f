/*
 * yamlish.h — the YAML subset of beanstalk replies, read into plain values.
 *
 * Contract: yaml_dict() reads a stats document ("---\n" then "key: value\n"
 * lines), yaml_list() a list ("---\n" then "- item\n" lines), yaml_tubes()
 * the nested stats-tubes document ("---\n", then per tube "\"name\":\n" and
 * its keys indented two spaces). A double-quoted value is unquoted (\" and
 * \\ unescaped) and marked `quoted`, so output can keep it a string; a bare
 * value is kept verbatim. Anything else is an error with the offending
 * line in err. Every result owns its strings; free it with its _free().
 */
#ifndef TUBED_CLI_YAMLISH_H
#define TUBED_CLI_YAMLISH_H

#include <stddef.h>

typedef struct Pair {
    char *key;
    char *value;
    int quoted;
} Pair;

typedef struct Dict {
    Pair *items;
    size_t n, cap;
} Dict;

typedef struct StrList {
    char **items;
    size_t n, cap;
} StrList;

typedef struct NamedDict {
    char *name;
    Dict dict;
} NamedDict;

typedef struct DictList {
    NamedDict *items;
    size_t n, cap;
} DictList;

int yaml_dict(const char *data, size_t len, Dict *out, char *err, size_t errlen);
int yaml_list(const char *data, size_t len, StrList *out, char *err, size_t errlen);
int yaml_tubes(const char *data, size_t len, DictList *out, char *err,
               size_t errlen);

/* The value of key, or NULL. */
const char *dict_get(const Dict *d, const char *key);
/* The value of key as an unsigned number; `dflt` when absent or not one. */
unsigned long long dict_num(const Dict *d, const char *key,
                            unsigned long long dflt);

void dict_free(Dict *d);
void strlist_free(StrList *l);
void dictlist_free(DictList *l);

#endif
