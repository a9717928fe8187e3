/* ddp_buckets.c — DDP's gradient bucket assignment (see ddp_buckets.h). */
#include "common/ddp_buckets.h"

int ddp_buckets_assign(const size_t *param_bytes, int n, size_t first_cap_bytes,
                       size_t cap_bytes, int *bucket_of)
{
    if (n <= 0)
        return 0;
    size_t limit = first_cap_bytes < cap_bytes ? first_cap_bytes : cap_bytes, size = 0;
    int b = 0;
    for (int i = n - 1; i >= 0; i--) {
        bucket_of[i] = b;
        size += param_bytes[i];
        if (size >= limit && i > 0) {
            b++;
            size = 0;
            limit = cap_bytes;
        }
    }
    return b + 1;
}

size_t ddp_bucket_cap_bytes(double mb)
{
    double bytes = mb * (double)(1 << 20);
    return bytes <= 0.0 ? 0 : (size_t)bytes;
}
