/* util/step_number.h: step numbers as (source, count), and where a waiting window goes
 * when the step source changes under it, in the collector (pt_step_retarget) and as the
 * agent and coordinator follow it from their reports (pt_step_follow), at each bound. */
#include "util/step_number.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define SPAN PT_STEP_SOURCE_SPAN
#define CLOCK (PT_STEP_SOURCE_CLOCK * SPAN)
#define LEARNED (PT_STEP_SOURCE_LEARNED * SPAN)
#define OPTIMIZER (PT_STEP_SOURCE_OPTIMIZER * SPAN)

static void test_numbers(void **state)
{
    (void)state;
    assert_int_equal(pt_step_count(OPTIMIZER + 12), 12);
    assert_int_equal(pt_step_source(OPTIMIZER + 12), PT_STEP_SOURCE_OPTIMIZER);
    assert_int_equal(pt_step_source(LEARNED - 1), PT_STEP_SOURCE_CLOCK);
    assert_int_equal(pt_step_count(LEARNED - 1), SPAN - 1);
    assert_int_equal(pt_step_count(7), 7); /* no perftracker run: plain counts */
    assert_int_equal(pt_step_source(7), PT_STEP_SOURCE_NONE);
    assert_int_equal(pt_step_count(-1), -1);
    assert_true(PT_STEP_SOURCE_COUNT * SPAN < PT_STEP_NUMBER_MAX); /* inside the protocol's bound */
}

static void test_retarget(void **state)
{
    (void)state;
    /* Armed at 5 with the rank at 0 (level 0): 5 steps to go, the first new one counts. */
    assert_int_equal(pt_step_retarget(5, 0, LEARNED + 1), LEARNED + 5);
    /* One step left (previous 4): it opens at the new source's first step; none left too. */
    assert_int_equal(pt_step_retarget(5, 4, LEARNED + 1), LEARNED + 1);
    assert_int_equal(pt_step_retarget(5, 5, LEARNED + 1), LEARNED + 1);
    assert_int_equal(pt_step_retarget(5, 3, LEARNED + 1), LEARNED + 2);
    /* The same source, or a worse one: nothing moves. */
    assert_int_equal(pt_step_retarget(LEARNED + 5, LEARNED + 1, LEARNED + 2), LEARNED + 5);
    assert_int_equal(pt_step_retarget(LEARNED + 5, LEARNED + 1, CLOCK + 99), LEARNED + 5);
    /* Already past the start's source when armed: the window opens at the next step. */
    assert_int_equal(pt_step_retarget(5, CLOCK + 7, LEARNED + 1), 5);
}

static void test_follow(void **state)
{
    (void)state;
    /* From level 0 (exact): the new source's first step is its count 1, whatever count
     * the report shows by then. */
    assert_int_equal(pt_step_follow(3, 0, LEARNED + 2), LEARNED + 3);
    assert_int_equal(pt_step_follow(3, 0, LEARNED + 1), LEARNED + 3);
    /* The clock's first step is its period: the first report stands for it. */
    assert_int_equal(pt_step_follow(3, 0, CLOCK + 1765000000), CLOCK + 1765000002);
    /* Armed below a source it already had: about where it was. */
    assert_int_equal(pt_step_follow(3, LEARNED + 40, OPTIMIZER + 2), OPTIMIZER + 2);
    assert_int_equal(pt_step_follow(LEARNED + 9, LEARNED + 2, LEARNED + 4), LEARNED + 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_retarget),
        cmocka_unit_test(test_follow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
