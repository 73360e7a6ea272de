CHECKS = {}
