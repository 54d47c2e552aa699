"""emit"""
