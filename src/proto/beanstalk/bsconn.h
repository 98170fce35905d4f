/*
 * bsconn.h — the beanstalk front-end: a Proto for the connection layer.
 *
 * Contract: beanstalk_init() fills a Beanstalk whose proto member main.c
 * hands to server_listen(). Each connection then parses beanstalk request
 * lines and put bodies from the bytes the connection layer offers, runs
 * each command through cmd.c, and keeps beanstalkd 1.12's byte-for-byte
 * behaviour for malformed input: overlong lines are thrown away in
 * MAX_LINE windows, bodies too big or refused are read and dropped before
 * their one reply.
 */
#ifndef TUBED_BSCONN_H
#define TUBED_BSCONN_H

#include "bs.h"

void beanstalk_init(Beanstalk *b, Server *s);

#endif
