/* model.h — a trainable model: its named tensors and its forward/backward.
 *
 * Models are written once against struct backend and the layers (conv.h, batchnorm.h,
 * linear.h; layer.h the grad hook).  model_create() picks one by name from the registry
 * (struct model_spec below); the returned model owns its parameters and activation buffers, which grow
 * to the largest batch seen.  Activations live until the next forward, so backward must
 * follow the forward it differentiates. */
#ifndef DDPPROF_MODEL_H
#define DDPPROF_MODEL_H

#include "nn/layer.h"
#include "nn/layer_list.h"
#include "nn/params.h"

#include <stdint.h>

struct comm;

struct model {
    const char *name;
    struct backend *be;
    struct param_table params;
    struct layer_list layers; /* its layers in forward order, their costs, the observer
                                 (layer_list.h); filled by the model's create */
    int in_c, in_h, in_w, classes; /* input (n, in_c, in_h, in_w) -> logits (n, classes) */

    /* x (n, in_c, in_h, in_w) fp32 on the device -> *logits (n, classes) fp32, owned by
     * the model.  train selects batch statistics in BatchNorm.  Under autocast the model
     * casts x to the half type and its half logits to fp32 for the loss (an fp32 op). */
    int (*forward)(struct model *m, const float *x, int n, int train, const float **logits);
    /* from dlogits (n, classes) fp32 of the last forward (under autocast cast back to the
     * half type first: the logits cast's backward): every parameter's fp32 grad, each
     * reported to hook (may be NULL) as soon as it is final */
    int (*backward)(struct model *m, const float *dlogits, const struct grad_hook *hook);
    /* make every BatchNorm a SyncBatchNorm over comm (NULL: back to local) */
    void (*set_sync_bn)(struct model *m, struct comm *comm);
    /* autocast every conv, linear and batch norm (and the input) to amp: activations of
     * the half type from the next forward on; 0 or -1 */
    int (*set_amp)(struct model *m, enum amp_dtype amp);
    enum amp_dtype amp;
    void (*destroy)(struct model *m);
    void *impl;
};

/* Options a model may take; each model reads its own and ignores the others.  A new one
 * is a field here with its default in MODEL_OPTS_DEFAULT, the one line of trainer/cli.c's
 * option table that parses, documents and records it (meta.csv), and the model that reads
 * it (its *_create_opts below). */
struct model_opts {
    int width; /* resnet18: channels of its first stage, doubled at each stage (64) */
};

#define MODEL_OPTS_DEFAULT {.width = 64}

/* One row of the model registry (model.c): everything the rest of ddpprof knows of a
 * model, given once, in the model's own file (convnet.c: convnet_spec).  A new model is its
 * nn/ file with its spec and one line of model.c's registry; names, --model's help, input
 * shapes, the lines it prints and the option it takes all come from here
 * (tests/test_model_registry.c checks that nothing else names a model). */
struct model_spec {
    const char *name;    /* --model NAME; checkpoints' "model" */
    const char *about;   /* --model's help: "the DDP tutorial's" */
    int in_c, in_h, in_w, classes; /* input (n, in_c, in_h, in_w) -> logits (n, classes) */
    int example_lines;   /* its run prints the distributed-training example's lines
                            (ResNet18's seed script), not the DDP tutorial's */
    const char *option;  /* the command-line option only this model reads (a model_opts
                            field, recorded in meta.csv for it alone), or NULL */
    /* a new model from seed; opts never NULL */
    struct model *(*create)(struct backend *be, uint64_t seed, const struct model_opts *opts);
};

extern const struct model_spec convnet_spec, resnet18_spec;

/* The row of the model called name, or NULL + error_set "unknown model ... (known: ...)". */
const struct model_spec *model_spec(const char *name);

/* The registry's rows in order, NULL-terminated; the first is the default model. */
const struct model_spec *const *model_specs(void);

/* The model called name (model_spec), its parameters initialised with PyTorch's default
 * distributions from seed.  opts may be NULL (MODEL_OPTS_DEFAULT).  NULL + error_set for an
 * unknown name (the message lists the known ones). */
struct model *model_create_opts(const char *name, struct backend *be, uint64_t seed,
                                const struct model_opts *opts);
/* model_create_opts with every option at its default */
struct model *model_create(const char *name, struct backend *be, uint64_t seed);

/* the names model_create accepts, comma-separated, in registry order */
const char *model_names(void);

/* --model's help: "the model to train: convnet (the DDP tutorial's) or resnet18 (...)" */
const char *model_help(void);

/* 1 when the command-line option spelt option applies to the model called name: no model
 * claims it (model_spec.option), or this one does */
int model_option_applies(const char *name, const char *option);

/* The input shape (c, h, w) and class count of the model called name, without creating
 * it; 0, or -1 (error_set "unknown model ...") */
int model_input(const char *name, int *c, int *h, int *w, int *classes);

struct model *convnet_create(struct backend *be, uint64_t seed);
/* width: channels of conv1 and conv2 (64: the example's 11,173,962 parameters) */
struct model *resnet18_create(struct backend *be, uint64_t seed, int width);

#endif
