#include "names.h"

int tube_name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '/' ||
           c == ';' || c == '.' || c == '$' || c == '_' || c == '(' ||
           c == ')';
}

int tube_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > MAX_TUBE_NAME || name[0] == '-')
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!tube_name_char((unsigned char)name[i]))
            return 0;
    return 1;
}

