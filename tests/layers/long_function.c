/* long_function.c — not built: test_function_length_rule runs cmake/check_function_length.py
 * on it with --max 6; only too_long (8 lines) must be named.  What must not count: a struct
 * body, an initialiser, braces in a string, a comment and a directive { */
#define BRACE {
struct pair {
    int a, b;
};
static const struct pair pairs[] = {{1, 2}, {3, 4}};

static int short_one(int x) { return x + 1; }

static int too_long(int x)
{
    const char *s = "}}}";
    if (x > 0) { /* } */
        x += (int)s[0];
    }
    return x;
}

int same_line_brace(void) {
    int y = short_one(pairs[0].a);
    y += too_long(y);
    return y;
}
