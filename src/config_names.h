/* config_names: the spellings of the config's enumerations, shared by the parser (config.c) and the writer
 * (config_echo.c). Internal to the config module. */
#ifndef MOK_CONFIG_NAMES_H
#define MOK_CONFIG_NAMES_H

extern const char *const mok_cfg_search_names[3];
extern const char *const mok_cfg_mode_names[3];
extern const char *const mok_cfg_dtype_names[MOK_NDTYPES];
extern const char *const mok_cfg_pass_names[MOK_NPASSES];
extern const char *const mok_cfg_wgrad_names[MOK_NWGRADS];
extern const char *const mok_cfg_dist_names[3];
extern const char *const mok_cfg_input_dist_names[2];

#endif
