/*
 * names.h — tube names, as the beanstalk protocol defines them.
 *
 * Contract: a legal name is 1..MAX_TUBE_NAME bytes of A-Z a-z 0-9 and
 * "-+/;.$_()", not starting with '-'. Every protocol and the config file
 * share this one definition, so a name one front-end accepts is a name
 * every other can reach.
 */
#ifndef TUBED_NAMES_H
#define TUBED_NAMES_H

#include <stddef.h>

#define MAX_TUBE_NAME 200

/* 1 if c may appear in a tube name. */
int tube_name_char(unsigned char c);

/* 1 if [name, name+len) is a legal tube name. */
int tube_name_valid(const char *name, size_t len);

#endif
