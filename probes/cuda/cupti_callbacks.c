/* cupti_callbacks.c — CUPTI callback subscription and dispatch.
 *
 * One subscriber (CUPTI allows one per process, so a failure here means another tool,
 * e.g. nsys, owns CUPTI) and a table of (domain, callback id, handler).  The probes need
 * only the resource domain: when a context is about to be destroyed, its activity
 * buffers are flushed so its records are not lost. */
#include "probes/cuda/cupti_internal.h"

#include <stddef.h>

static CUpti_SubscriberHandle callbacks_subscriber;

static void callbacks_context_destroying(const void *cbdata)
{
    (void)cbdata;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

static const struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    void (*handler)(const void *cbdata);
} callbacks_table[] = {
    {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
     callbacks_context_destroying},
};
#define CALLBACKS_N (sizeof callbacks_table / sizeof callbacks_table[0])

static void CUPTIAPI callbacks_dispatch(void *userdata, CUpti_CallbackDomain domain,
                                        CUpti_CallbackId cbid, const void *cbdata)
{
    (void)userdata;
    for (size_t i = 0; i < CALLBACKS_N; i++)
        if (callbacks_table[i].domain == domain && callbacks_table[i].cbid == cbid)
            callbacks_table[i].handler(cbdata);
}

CUptiResult cupti_callbacks_subscribe(void)
{
    CUptiResult r = cuptiSubscribe(&callbacks_subscriber, callbacks_dispatch, NULL);
    if (r != CUPTI_SUCCESS) {
        callbacks_subscriber = NULL;
        return r;
    }
    for (size_t i = 0; i < CALLBACKS_N; i++) {
        r = cuptiEnableCallback(1, callbacks_subscriber, callbacks_table[i].domain,
                                callbacks_table[i].cbid);
        if (r != CUPTI_SUCCESS) {
            cupti_callbacks_unsubscribe();
            return r;
        }
    }
    return CUPTI_SUCCESS;
}

void cupti_callbacks_unsubscribe(void)
{
    if (callbacks_subscriber)
        cuptiUnsubscribe(callbacks_subscriber);
    callbacks_subscriber = NULL;
}
