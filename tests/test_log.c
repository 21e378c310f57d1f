/*
 * test_log.c — the log callback: messages at or below the level reach it as one
 * line each, with their level; above the level nothing does; NULL goes back to
 * stderr.
 */
#include "test.h"

#include "eddy.h"

typedef struct {
    int n;
    eddy_log_level level;
    char text[256];
} seen;

static void on_log(void *user, eddy_log_level level, const char *text) {
    seen *s = user;
    s->n++;
    s->level = level;
    snprintf(s->text, sizeof s->text, "%s", text);
}

TEST(log_callback_gets_messages_at_the_level) {
    eddy_log_level before = eddy_log_get_level();
    seen s = {0};
    eddy_log_set_callback(on_log, &s);
    eddy_log_set_level(EDDY_LOG_INFO);
    CHECK_EQ(eddy_log_get_level(), EDDY_LOG_INFO);
    eddy_log(EDDY_LOG_INFO, "model: %s, %d layers", "tiny", 4);
    CHECK_EQ(s.n, 1);
    CHECK_EQ(s.level, EDDY_LOG_INFO);
    CHECK_STR(s.text, "model: tiny, 4 layers");
    eddy_log(EDDY_LOG_DEBUG, "dropped");
    CHECK_EQ(s.n, 1);
    eddy_log(EDDY_LOG_WARN, "two\nlines");
    CHECK_EQ(s.n, 2);
    CHECK_EQ(s.level, EDDY_LOG_WARN);
    CHECK_STR(s.text, "two lines");
    eddy_log_set_callback(NULL, NULL);
    eddy_log(EDDY_LOG_ERROR + 9, "no such level"); /* ignored, not an out-of-bounds name */
    CHECK_EQ(s.n, 2);
    eddy_log_set_level(before);
}
