/* A stand-in libnvidia-ml.so.1 with one GPU, for the real nvidia-ml-py binding in the tests.
 *
 * Built by tests/integration/test_nvml_stock_python.py with the system C compiler. It
 * answers the calls below with the readings of the H200 of ../shared/reference/real-gpu
 * under load; every other NVML function is absent, which the binding reports as
 * NVMLError_FunctionNotFound (a driver older than the query), so nvml_facts gives null.
 */
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct { unsigned int gpu; unsigned int memory; } nvmlUtilization_t;

static int device = 0;

static nvmlReturn_t text(char *buf, unsigned int len, const char *value)
{
    if (len <= strlen(value))
        return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    strcpy(buf, value);
    return 0;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return 0; }
nvmlReturn_t nvmlInit_v2(void) { return 0; }
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(nvmlReturn_t result) { (void)result; return "stub NVML error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) { return text(v, n, "580.159.04"); }
nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int n) { return text(v, n, "13.580.159.04"); }
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { *v = 13000; return 0; }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { *count = 1; return 0; }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle)
{
    if (index != 0)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *handle = &device;
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(void *h, char *v, unsigned int n) { (void)h; return text(v, n, "NVIDIA H200"); }
nvmlReturn_t nvmlDeviceGetUUID(void *h, char *v, unsigned int n)
{
    (void)h;
    return text(v, n, "GPU-00000000-0000-4000-8000-000000000200");
}
/* Under load: SW power cap active (0x4). */
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(void *h, unsigned long long *mask) { (void)h; *mask = 0x4; return 0; }
nvmlReturn_t nvmlDeviceGetUtilizationRates(void *h, nvmlUtilization_t *u) { (void)h; u->gpu = 97; u->memory = 24; return 0; }
