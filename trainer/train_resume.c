/* train_resume.c — --resume (train_rank.h): the checkpoint of an earlier run read into the
 * model, the optimizer and the GradScaler, with the epoch and step it was taken at; in DDP
 * rank 0 alone reads the file and sends it to the others.  Also what is left to train, and
 * where in its epoch a checkpoint taken mid-epoch (--checkpoint-every) goes on. */
#include "train_rank.h"

#include "comm/comm.h"
#include "comm/store.h"
#include "common/error.h"
#include "probes/trace_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rank_resume_local(struct rank *r)
{
    const struct train_opts *o = r->o;
    if (checkpoint_resume(o->run.resume_path, &r->m->params, &r->opt, &r->scaler, o->model,
                          &r->resume.start_epoch, &r->step))
        return error_wrap("--resume");
    if ((r->resume.has_run = checkpoint_read_run(o->run.resume_path, &r->resume.run)) < 0)
        return error_wrap("--resume");
    r->resume.resumed = 1;
    return 0;
}

/* --resume in DDP: rank 0 reads the checkpoint and sends its bytes to every rank through
 * the comm (the other nodes need no copy of rank 0's run directory); each rank loads them
 * from a private temporary file.  The size goes through the store, -1 and rank 0's error
 * when it could not read the file, so the others fail with its reason. */
int rank_resume_ddp(struct rank *r)
{
    const struct train_opts *o = r->o;
    struct backend *be = r->dev.be;
    char text[1200] = "";
    size_t len = 0;
    long long bytes = -1;
    unsigned char *data = NULL;
    if (r->rank == 0) {
        FILE *f = fopen(o->run.resume_path, "rb");
        struct stat st;
        if (!f || fstat(fileno(f), &st) != 0 || !(data = malloc((size_t)st.st_size + 4)) ||
            fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
            snprintf(text, sizeof text, "-1 --resume %s: cannot read it (%s)",
                     o->run.resume_path, strerror(errno ? errno : EIO));
        } else {
            bytes = (long long)st.st_size;
            snprintf(text, sizeof text, "%lld", bytes);
        }
        if (f)
            fclose(f);
        if (store_set(r->store, "resume_bytes", text, strlen(text))) {
            free(data);
            return -1;
        }
        if (bytes < 0) {
            free(data);
            return error_set("%s", text + 3);
        }
    } else {
        if (store_get(r->store, "resume_bytes", text, sizeof text - 1, &len))
            return -1;
        text[len] = '\0';
        bytes = atoll(text);
        if (bytes < 0)
            return error_set("rank 0 could not resume: %s", text + 3);
        if (!(data = malloc((size_t)bytes + 4)))
            return error_set("out of memory for a %lld-byte checkpoint", bytes);
    }
    size_t words = ((size_t)bytes + 3) / 4;
    float *dev = be->alloc(be, words * sizeof(float) + 4);
    int rc = dev ? 0 : error_set("out of memory for the checkpoint");
    if (rc == 0 && r->rank == 0)
        be->upload(be, dev, data, (size_t)bytes);
    if (rc == 0 && r->coll->broadcast(r->coll, dev, words, COMM_F32, 0))
        rc = error_wrap("receiving the checkpoint from rank 0");
    if (rc == 0 && r->rank != 0)
        be->download(be, data, dev, (size_t)bytes);
    if (dev)
        be->free(be, dev);
    const char *path = o->run.resume_path;
    char tmp[128];
    if (rc == 0 && r->rank != 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%.80s/ddpprof-resume-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(tmp);
        size_t done = 0;
        ssize_t w = 1;
        while (fd >= 0 && done < (size_t)bytes && w != 0) {
            w = write(fd, data + done, (size_t)bytes - done);
            if (w > 0)
                done += (size_t)w;
            else if (w < 0 && errno != EINTR)
                break;
        }
        if (fd < 0 || done < (size_t)bytes) /* w == 0: nothing more fits */
            rc = error_set("cannot write the checkpoint to %s: %s", tmp,
                           fd < 0 || w < 0 ? strerror(errno) : "no space left (short write)");
        if (fd >= 0)
            close(fd);
        path = tmp;
    }
    free(data);
    if (rc == 0 && checkpoint_resume(path, &r->m->params, &r->opt, &r->scaler, o->model,
                                     &r->resume.start_epoch, &r->step))
        rc = error_wrap("--resume");
    if (rc == 0 && (r->resume.has_run = checkpoint_read_run(path, &r->resume.run)) < 0)
        rc = error_wrap("--resume %s", o->run.resume_path);
    if (r->rank != 0 && path != o->run.resume_path)
        unlink(path);
    r->resume.resumed = rc == 0;
    return rc;
}

/* --resume from a checkpoint whose epochs are all done is refused: nothing would train;
 * so is one taken mid-epoch by a run of another world or batch size, whose sampler
 * position would point at other samples here */
int rank_resume_check(const struct rank *r)
{
    const struct train_opts *o = r->o;
    const struct checkpoint_run *cr = &r->resume.run;
    if (r->resume.start_epoch < o->run.epochs && r->resume.has_run && cr->position > 0 &&
        (cr->world_size != r->world || cr->batch_size != o->data.batch_size)) {
        char what[160];
        int n = 0;
        if (cr->world_size != r->world)
            n += snprintf(what + n, sizeof what - (size_t)n, "world size %d, now %d",
                          cr->world_size, r->world);
        if (cr->batch_size != o->data.batch_size)
            snprintf(what + n, sizeof what - (size_t)n, "%sbatch size %d per rank, now %d",
                     n ? " and " : "", cr->batch_size, o->data.batch_size);
        return error_set("--resume: %s was taken mid-epoch (epoch %d, %lld samples into "
                         "each rank's share) with %s: the rest of that epoch would train "
                         "other samples; resume with the same --batch-size and ranks, or "
                         "from an epoch-end checkpoint",
                         o->run.resume_path, r->resume.start_epoch + 1, cr->position, what);
    }
    if (r->resume.start_epoch < o->run.epochs) {
        /* the steps left, at most (every epoch whole): each rank's share of the samples
         * (ceil) in batches (ceil) */
        const int64_t share = ((int64_t)r->train.n + r->world - 1) / r->world;
        const int64_t per_epoch = (share + o->data.batch_size - 1) / o->data.batch_size;
        const int64_t left = (int64_t)(o->run.epochs - r->resume.start_epoch) * per_epoch;
        if (r->step > TRACE_STEP_MAX - left)
            return error_set("--resume: %s is at step %lld and this run takes up to %lld more: "
                             "past step %lld, the most a trace holds (its step column is 32-bit, "
                             "probes/TRACE.md), so the report could not read the run; resume "
                             "from an earlier checkpoint, or give it to --init",
                             o->run.resume_path, (long long)r->step, (long long)left,
                             (long long)TRACE_STEP_MAX);
        return 0;
    }
    return error_set("--resume: %s has %d epoch(s) done and --epochs is %d: nothing left "
                     "to train (give --epochs above %d)",
                     o->run.resume_path, r->resume.start_epoch, o->run.epochs,
                     r->resume.start_epoch);
}

int64_t rank_resume_first(const struct rank *r, int epoch, int64_t count)
{
    const struct train_opts *o = r->o;
    if (!r->resume.resumed || epoch != r->resume.start_epoch)
        return 0;
    /* resumed from a checkpoint taken mid-epoch (--checkpoint-every): skip the batches
     * that checkpoint had done; steps per epoch are those of the run that wrote it, the
     * same world size and batch size */
    if (r->resume.has_run) {
        int64_t first = r->resume.run.position; /* same world and batch size: checked */
        if (first >= count && first > 0)
            return error_set("--resume %s: its sampler position %lld is past this epoch's "
                             "%lld samples per rank (was --limit or --drop-last changed?)",
                             o->run.resume_path, (long long)first, (long long)count);
        return first;
    }
    /* a checkpoint without them */
    const int64_t per_epoch = (count + o->data.batch_size - 1) / o->data.batch_size;
    int64_t done = r->step - (int64_t)epoch * per_epoch;
    return done > 0 && done < per_epoch ? done * o->data.batch_size : 0;
}
