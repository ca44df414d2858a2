SELECT set_config(%(set_config_2)s, %(set_config_3)s, %(set_config_4)s) AS set_config_1
