/* text.c -- see text.h. */
#include <stdbool.h>
#include <string.h>

#include "proxy/base/text.h"

/* ---- glob ---------------------------------------------------------------------- */

/* Whether the pattern element at p (one char, ?, \c or a [class]) takes c;
 * *adv is the element's length. */
static bool elem_match(const char *p, const char *pe, unsigned char c, size_t *adv)
{
    if (*p == '?') {
        *adv = 1;
        return true;
    }
    if (*p == '\\' && p + 1 < pe) {
        *adv = 2;
        return (unsigned char)p[1] == c;
    }
    if (*p != '[') {
        *adv = 1;
        return (unsigned char)*p == c;
    }
    const char *q = p + 1;
    bool neg = false, hit = false;
    if (q < pe && *q == '^') {
        neg = true;
        q++;
    }
    while (q < pe && *q != ']') {
        if (*q == '\\' && q + 1 < pe) {
            hit |= (unsigned char)q[1] == c;
            q += 2;
        } else if (q + 2 < pe && q[1] == '-') {
            unsigned char lo = (unsigned char)q[0], hi = (unsigned char)q[2];
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            hit |= c >= lo && c <= hi;
            q += 3;
        } else {
            hit |= (unsigned char)*q == c;
            q++;
        }
    }
    *adv = (size_t)(q - p) + (q < pe);      /* and the ']' */
    return hit != neg;
}

/* The classic walk: on a mismatch, back to just after the last '*' and
 * let it take one more character. Linear in each '*''s span, never
 * recursive, so no pattern can exhaust the stack. */
bool text_glob(const char *p, size_t plen, const char *s, size_t slen)
{
    const char *pe = p + plen, *se = s + slen, *star = NULL, *mark = NULL;
    size_t adv;

    /* stringmatchlen compares nothing against "": only "" matches it (its
     * callers take "*" as every name before asking). */
    if (slen == 0)
        return plen == 0 || (plen == 1 && p[0] == '*');

    while (s < se) {
        if (p < pe && *p == '*') {
            while (p < pe && *p == '*')
                p++;
            if (p == pe)
                return true;
            star = p;
            mark = s;
            continue;
        }
        if (p < pe && elem_match(p, pe, (unsigned char)*s, &adv)) {
            p += adv;
            s++;
            continue;
        }
        if (star == NULL)
            return false;
        p = star;
        s = ++mark;
    }
    while (p < pe && *p == '*')
        p++;
    return p == pe;
}

/* ---- fields and labels --------------------------------------------------------- */

const char *text_field(const char *text, const char *name, char *buf, size_t size)
{
    size_t n = strlen(name);

    for (const char *l = text; l != NULL && *l != '\0'; l = strchr(l, '\n'), l = l ? l + 1 : l) {
        if (strncmp(l, name, n) != 0 || l[n] != ':')
            continue;
        size_t len = strcspn(l + n + 1, "\r\n");
        if (len >= size)
            return NULL;
        memcpy(buf, l + n + 1, len);
        buf[len] = '\0';
        return buf;
    }
    return NULL;
}

void text_escape(FILE *f, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\\' || ch == '"')
            fprintf(f, "\\%c", ch);
        else if (ch >= 0x20 && ch < 0x7f)
            fputc(ch, f);
        else
            fprintf(f, "\\\\x%02x", ch);
    }
}
