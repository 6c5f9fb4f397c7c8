/* Threads racing on the first call of a library built by
 * numba_cuda_launch.aot (tests/test_aot_cpu.py): each calls saxpy_launch at
 * once, so one binds the driver table while the others wait for it; prints
 * every thread's status. Built with -DP(x)=<prefix>_##x and -include of
 * the library's header. */
#include <pthread.h>
#include <stdio.h>

#define THREADS 8
static pthread_barrier_t start;
static int statuses[THREADS];

static void *run(void *arg) {
    int i = (int)(long)arg;
    pthread_barrier_wait(&start);
    statuses[i] = saxpy_launch(NULL, NULL, NULL, 1.0f, 10);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, run, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        printf("%d ", statuses[i]);
    printf("\n%s\n", P(driver_problem)() ? P(driver_problem)() : "bound");
    return 0;
}
