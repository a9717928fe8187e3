/* test_model_registry.c — a model is its nn/ file and one registry row (nn/model.h):
 *  1. every row is found by its name, in order, and an unknown name is one error listing
 *     the known ones; model_names and --model's help are made from the rows;
 *  2. the model a row creates has the row's input shape and class count (given once, in
 *     the row);
 *  3. an option a row claims is recorded for that model alone;
 *  4. no source outside trainer/nn/ names a registered model: nothing else needs an edit
 *     when a row is added (the CLI's help, meta.csv's options, the printed lines and the
 *     default model all come from the rows). */
#include "backend/backend.h"
#include "common/error.h"
#include "nn/model.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_rows(void)
{
    const struct model_spec *const *specs = model_specs();
    CHECK(specs[0] != NULL, "the registry has rows");
    char names[512] = "";
    for (int i = 0; specs[i]; i++) {
        const struct model_spec *s = specs[i];
        CHECK(model_spec(s->name) == s, "model_spec(\"%s\") finds its row", s->name);
        CHECK(s->in_c > 0 && s->in_h > 0 && s->in_w > 0 && s->classes > 1 && s->create &&
                  s->about && *s->about,
              "row %s is complete", s->name);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(specs[j]->name, s->name) != 0, "name %s twice", s->name);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 s->name);
        char want[256];
        snprintf(want, sizeof want, "%s (%s)", s->name, s->about);
        CHECK(strstr(model_help(), want) != NULL, "--model's help lacks '%s': %s", want,
              model_help());
    }
    CHECK(strcmp(model_names(), names) == 0, "model_names '%s', rows '%s'", model_names(),
          names);
    error_clear();
    CHECK(model_spec("lenet") == NULL && strstr(error_get(), "unknown model 'lenet'") &&
              strstr(error_get(), names),
          "unknown model: '%s'", error_get());
    int c, h, w, k;
    CHECK(model_input("lenet", &c, &h, &w, &k) == -1, "model_input of an unknown model");
}

static void test_shapes(void)
{
    struct backend *be = backend_cpu_create(1);
    CHECK(be != NULL, "cpu backend: %s", error_get());
    if (!be)
        return;
    struct model_opts o = MODEL_OPTS_DEFAULT;
    o.width = 4; /* resnet18's smallest sensible: the shape, not the size, is tested */
    for (const struct model_spec *const *s = model_specs(); *s; s++) {
        struct model *m = model_create_opts((*s)->name, be, 1, &o);
        CHECK(m != NULL, "%s: %s", (*s)->name, error_get());
        if (!m)
            continue;
        CHECK(strcmp(m->name, (*s)->name) == 0 && m->in_c == (*s)->in_c &&
                  m->in_h == (*s)->in_h && m->in_w == (*s)->in_w &&
                  m->classes == (*s)->classes,
              "%s: model %s %dx%dx%d -> %d, row %dx%dx%d -> %d", (*s)->name, m->name, m->in_c,
              m->in_h, m->in_w, m->classes, (*s)->in_c, (*s)->in_h, (*s)->in_w, (*s)->classes);
        int c, h, w, k;
        CHECK(model_input((*s)->name, &c, &h, &w, &k) == 0 && c == m->in_c && h == m->in_h &&
                  w == m->in_w && k == m->classes,
              "%s: model_input differs from the model", (*s)->name);
        m->destroy(m);
    }
    be->destroy(be);
}

static void test_options(void)
{
    for (const struct model_spec *const *s = model_specs(); *s; s++) {
        if (!(*s)->option)
            continue;
        CHECK(model_option_applies((*s)->name, (*s)->option), "%s: its own %s", (*s)->name,
              (*s)->option);
        for (const struct model_spec *const *t = model_specs(); *t; t++)
            if (*t != *s)
                CHECK(!model_option_applies((*t)->name, (*s)->option), "%s applies to %s",
                      (*s)->option, (*t)->name);
    }
    CHECK(model_option_applies(model_specs()[0]->name, "--epochs"), "an option of every model");
}

/* the 1-based line of text that at points into */
static int line_of(const char *text, const char *at)
{
    int line = 1;
    for (const char *p = text; p < at; p++)
        line += *p == '\n';
    return line;
}

/* every "NAME" literal (a registered model's name in quotes) in the .c and .h files under
 * dir, outside trainer/nn/: one failure each */
static int scan(const char *root, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    DIR *d = opendir(path);
    CHECK(d != NULL, "cannot read %s", path);
    if (!d)
        return 0;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char rel[2048];
        snprintf(rel, sizeof rel, "%s/%s", dir, e->d_name);
        const size_t n = strlen(e->d_name);
        if (e->d_type == DT_DIR) {
            if (strcmp(rel, "trainer/nn") != 0)
                files += scan(root, rel);
            continue;
        }
        if (n < 3 || (strcmp(e->d_name + n - 2, ".c") != 0 && strcmp(e->d_name + n - 2, ".h") != 0 &&
                      strcmp(e->d_name + n - 3, ".cu") != 0 && strcmp(e->d_name + n - 3, ".cc") != 0))
            continue;
        char *text = test_read_file(root, rel);
        if (!text)
            continue;
        files++;
        for (const struct model_spec *const *s = model_specs(); *s; s++) {
            char lit[128];
            snprintf(lit, sizeof lit, "\"%s\"", (*s)->name);
            const char *at = strstr(text, lit);
            CHECK(at == NULL, "%s:%d names the model %s: a model's name belongs to its "
                  "registry row (trainer/nn/model.h)", rel, at ? line_of(text, at) : 0, lit);
        }
        free(text);
    }
    closedir(d);
    return files;
}

static void test_nothing_else_names_a_model(void)
{
    const char *root = test_source_dir();
    int files = 0;
    const char *dirs[] = {"trainer", "report", "probes", "common"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        files += scan(root, dirs[i]);
    CHECK(files > 100, "scanned %d source files", files);
    printf("%d source files outside trainer/nn/ name no registered model\n", files);
}

int main(void)
{
    test_rows();
    test_shapes();
    test_options();
    test_nothing_else_names_a_model();
    return test_finish();
}
